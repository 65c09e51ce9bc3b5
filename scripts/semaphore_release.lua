-- semaphore_release: give a permit back.
-- KEYS[1] timeouts, KEYS[2] owner, KEYS[3] limit
-- ARGV[1] id
-- reply: 1 if the permit was held, 0 if it had timed out or was gone (any
-- remnant is removed either way).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZCARD', KEYS[2]) -- type check before the first write
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[3]) -- the limit goes with the last holder
end
if deadline and tonumber(deadline) > now then
  return 1
end
return 0
