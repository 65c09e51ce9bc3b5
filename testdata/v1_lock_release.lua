-- lock_release: delete the lock only if the caller still holds it.
-- KEYS[1] lock key
-- ARGV[1] token
-- reply: 1 if it was held and is now free, 0 if the caller no longer held it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
