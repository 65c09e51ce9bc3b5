-- semaphore_holders: purge timed-out permits, then count the live ones.
-- KEYS[1] timeouts, KEYS[2] owner, KEYS[3] limit
-- reply: the number of live permits.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZCARD', KEYS[2]) -- type check before the first write
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) ~= redis.call('ZCARD', KEYS[2]) then
  redis.call('ZINTERSTORE', KEYS[2], 2, KEYS[2], KEYS[1], 'WEIGHTS', 1, 0)
end
local n = redis.call('ZCARD', KEYS[1])
if n == 0 then
  redis.call('DEL', KEYS[3]) -- the limit goes with the last holder
end
return n
