-- election_lock_owner: v4's lock_owner, the string layout elections keep until they move to the plain lock's hash (lib/lock.lua): store another Owner with the caller's lock, only if it still
-- holds it; the lease and the value's other fields stay as they are
-- (lib/lock.lua's lock_reowned).
-- KEYS[1] lock (lib/lock.lua's value)
-- ARGV[1] token, ARGV[2] the new owner ("" for none)
-- reply: 1 if stored, 0 if the caller no longer holds the lock.
-- (libraries)
local v = redis.call('GET', KEYS[1])
if lock_parse(v) ~= ARGV[1] then
  return 0
end
local owner = ARGV[2]
if owner == '' then
  owner = nil
end
redis.call('SET', KEYS[1], lock_reowned(v, owner), 'KEEPTTL')
return 1
