-- semaphore_acquire: the book's fair semaphore (listing 6.14), whole, in one
-- script: purge timed-out permits, rank by a shared counter, admit if a
-- slot is free and no live waiter is queued ahead; otherwise, in wait mode,
-- queue (or renew the caller's entry). A waiter handed a permit picks it
-- up here.
-- KEYS[1] timeouts (zset id -> deadline ms), KEYS[2] owner (zset id ->
-- counter), KEYS[3] counter, KEYS[4] the limit its holders share, KEYS[5]
-- queue, KEYS[6] waiters, KEYS[7] this engine's inbox, KEYS[8] this token's
-- void mark
-- ARGV[1] id (the permit's token), ARGV[2] limit, ARGV[3] mode: 0 one try,
-- 1 wait, ARGV[4] queue entry lifetime in ms, ARGV[5] TTL in ms
-- reply: {1, counter} if the caller holds a permit now, for its full TTL;
-- {0, ms until the first permit times out, rank in the queue (-1: not
-- queued), arrival number} if not; {0, -2} if the caller abandoned this
-- token; {-1, stored limit} if live permits or waiters were granted or
-- queued under another limit (nothing written).
--
-- The book's version needs a lock because its INCR, ZADDs and ZRANK are
-- separate round trips: two clients can both rank below the limit (seed
-- 001). Here nothing runs between them. The clock is the server's, and a
-- permit's score is its deadline, so permits may have different TTLs. The
-- newcomer would get the highest counter, so its rank is the owner set's
-- size: decided before writing.
local k = {timeouts = KEYS[1], owner = KEYS[2], counter = KEYS[3], limit = KEYS[4], q = KEYS[5], w = KEYS[6]}
local stored, err = sem_check(k)
if err then return err end
local now, token, ttl = now_ms(), ARGV[1], tonumber(ARGV[5])

local deadline = redis.call('ZSCORE', k.timeouts, token)
if deadline and tonumber(deadline) > now then -- handed over while queued
  redis.call('ZADD', k.timeouts, now + ttl, token)
  return {1, tonumber(redis.call('ZSCORE', k.owner, token))}
end
if stored and stored ~= ARGV[2] and (redis.call('ZCOUNT', k.timeouts, '(' .. now, '+inf') > 0 or q_live(k.w, now)) then
  return {-1, tonumber(stored)}
end
if redis.call('EXISTS', KEYS[8]) == 1 then
  return {0, -2}
end

local limit = tonumber(ARGV[2])
sem_purge(k, now)
local c = sem_admit(k, limit, now, token) -- waiters first, in order
if not c and redis.call('ZCARD', k.owner) < limit then
  c = redis.call('INCR', k.counter) -- a free slot and nobody queued
  redis.call('ZADD', k.owner, c, token)
end
if redis.call('ZCARD', k.owner) > 0 then
  redis.call('SET', k.limit, ARGV[2])
end
if c then
  redis.call('ZADD', k.timeouts, now + ttl, token)
  return {1, c}
end

local first = redis.call('ZRANGE', k.timeouts, 0, 0, 'WITHSCORES')
local hint = tonumber(first[2]) - now
if ARGV[3] == '0' then
  return {0, hint, -1, 0}
end
local rank, arrival = q_join(k.q, k.w, token, now, tonumber(ARGV[4]), KEYS[7])
return {0, hint, rank, arrival}
