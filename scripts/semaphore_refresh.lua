-- semaphore_refresh: move a live permit's deadline to now + TTL.
-- KEYS[1] timeouts, KEYS[2] owner, KEYS[3] limit
-- ARGV[1] id, ARGV[2] TTL in ms
-- reply: 1 if refreshed; 0 if it had timed out or was gone.
--
-- Unlike the book's refresh_fair_semaphore, which ZADDs first and so brings
-- a timed-out permit back, a permit past its deadline is never revived: its
-- remnants are removed and the caller told.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
local rank = redis.call('ZSCORE', KEYS[2], ARGV[1])
if deadline and rank and tonumber(deadline) > now then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  return 1
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[3]) -- the limit goes with the last holder
end
return 0
