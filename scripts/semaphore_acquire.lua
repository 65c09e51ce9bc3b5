-- semaphore_acquire: the book's fair semaphore (listing 6.14), whole, in one
-- script: purge timed-out permits, rank by a shared counter, admit if the
-- rank is below the limit.
-- KEYS[1] timeouts (zset id -> deadline ms), KEYS[2] owner (zset id ->
-- counter), KEYS[3] counter, KEYS[4] the limit its holders share, KEYS[5]
-- this token's void mark
-- ARGV[1] id (the permit's token), ARGV[2] limit, ARGV[3] TTL in ms
-- reply: {1, counter} if admitted; {0, ms until the first permit times out}
-- if full; {0, -2} if the caller abandoned this token; {-1, stored limit}
-- if live permits were granted under another limit (nothing written).
--
-- The book's version needs a lock because its INCR, ZADDs and ZRANK are
-- separate round trips: two clients can both rank below the limit (seed
-- 001). Here nothing runs between them. The clock is the server's, and a
-- permit's score is its deadline, so permits may have different TTLs.
--
-- The new id would get the highest counter, so its rank in the owner set is
-- the set's size: the book's "add, ZRANK, remove if too high" is decided
-- before writing, and a refused attempt writes nothing but the purge.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local counter = redis.call('GET', KEYS[3])
if counter and not string.match(counter, '^%d+$') then
  return redis.error_reply('ERR atomicredis: semaphore counter key does not hold a counter')
end
redis.call('ZCARD', KEYS[2]) -- type check before the first write
local stored = redis.call('GET', KEYS[4])
if stored and not string.match(stored, '^%d+$') then
  return redis.error_reply('ERR atomicredis: semaphore limit key does not hold a number')
end

-- The limit goes with the last live permit: while one lives, it binds.
if stored and stored ~= ARGV[2] and redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') > 0 then
  return {-1, tonumber(stored)}
end

-- Drop timed-out permits, then the same ids from the owner set
-- (ZINTERSTORE with weights 1, 0 keeps the owner set's counters).
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) ~= redis.call('ZCARD', KEYS[2]) then
  redis.call('ZINTERSTORE', KEYS[2], 2, KEYS[2], KEYS[1], 'WEIGHTS', 1, 0)
end

if redis.call('EXISTS', KEYS[5]) == 1 then
  return {0, -2}
end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[2]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, tonumber(first[2]) - now}
end
local c = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('ZADD', KEYS[2], c, ARGV[1])
redis.call('SET', KEYS[4], ARGV[2])
return {1, c}
