-- lock_release: free the lock only if the caller still holds it, and hand
-- it to the first live waiter, whom it wakes.
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] waiters
-- ARGV[1] token
-- reply: 1 if it was held (and is now free or handed over), 0 if the
-- caller no longer held it.
q_check(KEYS[3], KEYS[4])
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
lock_handoff(KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return 1
