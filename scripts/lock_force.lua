-- lock_force: free the lock whoever holds it (an administrator's call),
-- and hand it to the first live waiter, whom it wakes.
-- KEYS[1] the lock's hash (lib/lock.lua)
-- ARGV[1] wake channel prefix
-- reply: 1 if it was held (and is now free or handed over), 0 if it was
-- free.
-- (libraries)
local st = lk_load(KEYS[1], '')
if not st.holder then
  return 0
end
lk_free(st, ARGV[1])
return 1
