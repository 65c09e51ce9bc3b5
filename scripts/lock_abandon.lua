-- lock_abandon: abandon an acquire or a wait whose caller gave up. The lock
-- may have been taken or handed to the caller (then pass it on), the caller
-- may be queued (then leave), and a call of the caller's may still be on
-- its way on another connection (so mark the token: it takes nothing and
-- queues nowhere when it lands).
-- KEYS[1] the lock's hash (lib/lock.lua)
-- ARGV[1] token, ARGV[2] ms the token's mark is kept (the call timeout: how
-- long a late call may still land), ARGV[3] wake channel prefix
-- reply: 1 if the caller held the lock and it was passed on or freed, 0
-- otherwise.
--
-- The mark flags the lock: the hash is kept at least until the mark's
-- deadline, and no longer for it.
local st = lk_load(KEYS[1], ARGV[1])
local held = st.holder == ARGV[1]
if st.mine then
  local e = lk_entry(st, st.mine)
  if e and e.token == ARGV[1] then lk_leave(st, e) end
end
local mark = st.now + tonumber(ARGV[2])
st.put = {'x:' .. ARGV[1], fmt(mark)} -- written by lk_save
st.xd = math.max(st.xd, mark)
if held then
  lk_free(st, ARGV[3])
  return 1
end
lk_save(st)
return 0
