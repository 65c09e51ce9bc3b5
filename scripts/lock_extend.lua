-- lock_extend: give the caller's lock a new lease, only if it still holds it.
-- KEYS[1] lock key
-- ARGV[1] token, ARGV[2] new lease in ms
-- reply: 1 if extended, 0 if the caller no longer holds the lock.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
