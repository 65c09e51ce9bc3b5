-- lock_pttl: the caller's remaining lease.
-- KEYS[1] lock key
-- ARGV[1] token
-- reply: the PTTL in ms if the caller holds the lock, -3 if it does not.
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
  return redis.call('PTTL', KEYS[1])
end
return -3
