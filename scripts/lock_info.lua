-- lock_info: who holds the lock, for how long, and how many live waiters
-- are queued. Writes nothing.
-- KEYS[1] lock, KEYS[2] waiters
-- reply: {holder's token (false if free), its fence, its PTTL in ms, live
-- waiters, the Owner stored with it ("" if none)}. A value that is not a
-- lock's is free, as lock_acquire takes it (lib/lock.lua's lock_parse).
local v = redis.call('GET', KEYS[1])
local token, fence, owner, pttl = false, '0', '', -1
local t, f, o = string.match(v or '', '^(%S+) (%d+) %d+ ?(.*)$')
if t then
  token, fence, owner = t, f, o
  pttl = redis.call('PTTL', KEYS[1])
end
return {token, fence, pttl, q_live(KEYS[2], now_ms()), owner}
