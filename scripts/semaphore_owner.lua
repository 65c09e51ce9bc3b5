-- semaphore_owner: store another Owner with the caller's permit, only if
-- it is live; its deadline and counter, and every other permit, stay as
-- they are.
-- KEYS[1] timeouts, KEYS[2] owner, KEYS[3] counter, KEYS[4] limit, KEYS[5]
-- queue, KEYS[6] waiters, KEYS[7] owners (the extend script's keys; only
-- the first two and the last are used)
-- ARGV[1] id, ARGV[2] the new owner ("" for none)
-- reply: 1 if stored, 0 if the permit had timed out or was gone.
local now = now_ms()
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
local rank = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not deadline or not rank or tonumber(deadline) <= now then
  return 0
end
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[7], ARGV[1])
else
  redis.call('HSET', KEYS[7], ARGV[1], ARGV[2])
end
return 1
