-- lock_owner: store another Owner with the caller's lock, only if it still
-- holds it; the lease and the value's other fields stay as they are
-- (lib/lock.lua's lock_reowned).
-- KEYS[1] the lock's hash (lib/lock.lua)
-- ARGV[1] token, ARGV[2] the new owner ("" for none)
-- reply: 1 if stored, 0 if the caller no longer holds the lock.
-- (libraries)
local st = lk_load(KEYS[1], ARGV[1])
if st.holder ~= ARGV[1] then
  return 0
end
local owner = ARGV[2]
if owner == '' then
  owner = nil
end
local flag = st.flagged and '+' or ''
redis.call('HSET', KEYS[1], 'v', flag .. lock_reowned(st.value, owner))
return 1
