-- semaphore_pttl: the caller's permit's remaining time. Writes nothing.
-- KEYS[1] timeouts, KEYS[2] owner
-- ARGV[1] id
-- reply: ms until the permit times out if it is live, -3 if it is not.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
local rank = redis.call('ZSCORE', KEYS[2], ARGV[1])
if deadline and rank and tonumber(deadline) > now then
  return tonumber(deadline) - now
end
return -3
