-- lock_info: who holds the lock, for how long, and how many live waiters
-- are queued. Writes nothing.
-- KEYS[1] the lock's hash (lib/lock.lua)
-- reply: names and values in turn: when held, the fields of the lock's
-- value (lib/lock.lua's lock_fields names them) and 'ttl' (the remaining
-- lease in ms); then 'waiting' (live waiters). A value that is not a
-- lock's is free, as lock_acquire takes it (lib/lock.lua's lock_parse).
-- (libraries)
local st = lk_load(KEYS[1], '')
local out = lock_fields(st.value)
if #out > 0 then
  out[#out + 1] = 'ttl'
  out[#out + 1] = st.d - st.now
end
local waiting = 0
for i = st.h, st.n > 0 and st.t or 0 do
  local e = lk_entry(st, i)
  if e and e.deadline > st.now then waiting = waiting + 1 end
end
out[#out + 1] = 'waiting'
out[#out + 1] = waiting
return out
