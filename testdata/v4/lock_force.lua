-- lock_force: free the lock whoever holds it (an administrator's call),
-- and hand it to the first live waiter, whom it wakes.
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] waiters
-- ARGV[1] fence retention in ms, ARGV[2] wake channel prefix
-- reply: 1 if it was held (and is now free or handed over), 0 if it was
-- free.
local k = {lock = KEYS[1], fence = KEYS[2], q = KEYS[3], w = KEYS[4]}
if not lock_read(k.lock) then
  return 0
end
local err = lock_unlock(k, ARGV[1], ARGV[2])
if err then return err end
return 1
