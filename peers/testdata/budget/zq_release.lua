-- zq_release: zq_acquire's release (a design measured): the queue's
-- length read, then the key deleted.
-- KEYS[1] lock; ARGV[1] token
-- reply: 1 if released, 0 if not held, 2 if waiters are queued
local v = redis.call('GET', KEYS[1])
local t = ARGV[1]
if not v or string.sub(v, 1, #t + 1) ~= t .. ' ' then
  return 0
end
if redis.call('ZCARD', KEYS[1] .. ':queue') > 0 then return 2 end
redis.call('DEL', KEYS[1])
return 1
