-- election_lock_pttl: v4's lock_pttl, the string layout elections keep until they move to the plain lock's hash (lib/lock.lua): the caller's remaining lease.
-- KEYS[1] lock key
-- ARGV[1] token
-- reply: the PTTL in ms if the caller holds the lock, -3 if it does not.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then
  return redis.call('PTTL', KEYS[1])
end
return -3
