-- lock_info: who holds the lock, for how long, and how many live waiters
-- are queued. Writes nothing.
-- KEYS[1] lock, KEYS[2] waiters
-- reply: {holder's token (false if free), its fence, its PTTL in ms, live
-- waiters, the Owner stored with it ("" if none)}. A value that is not a
-- lock's is free, as lock_acquire takes it (lib/lock.lua's lock_parse).
-- (libraries)
local token, fence, _, owner = lock_read(KEYS[1])
local pttl = -1
if token then
  pttl = redis.call('PTTL', KEYS[1])
end
return {token or false, token and fmt(fence) or '0', pttl, q_live(KEYS[2], now_ms()), owner or ''}
