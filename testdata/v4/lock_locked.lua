-- lock_locked: whether anyone holds the lock.
-- KEYS[1] lock key
-- reply: 1 if held, 0 if free. GET (not EXISTS) so a key of the wrong type
-- is an error rather than a lock that looks held forever.
if redis.call('GET', KEYS[1]) then
  return 1
end
return 0
