-- t_release: lock_release's common path with only the lock's key passed
-- (a design measured; see t_acquire).
-- KEYS[1] lock; ARGV[1] token
-- reply: 1 if released, 0 if not held, 2 if waiters are queued
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return 0
end
if redis.call('ZCARD', KEYS[1] .. ':queue') == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
return 2
