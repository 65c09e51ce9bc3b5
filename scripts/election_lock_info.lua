-- election_lock_info: v4's lock_info, the string layout elections keep
-- until they move to the plain lock's hash (lib/lock.lua): who holds the lock, for how long, and how many live waiters
-- are queued. Writes nothing.
-- KEYS[1] lock, KEYS[2] waiters
-- reply: names and values in turn: when held, the fields of the lock's
-- value (lib/lock.lua's lock_fields names them) and 'ttl' (its PTTL in
-- ms); then 'waiting' (live waiters). A value that is not a lock's is
-- free, as lock_acquire takes it (lib/lock.lua's lock_parse).
-- (libraries)
local out = lock_fields(redis.call('GET', KEYS[1]))
if #out > 0 then
  out[#out + 1] = 'ttl'
  out[#out + 1] = redis.call('PTTL', KEYS[1])
end
out[#out + 1] = 'waiting'
out[#out + 1] = q_live(KEYS[2], now_ms())
return out
