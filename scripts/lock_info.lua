-- lock_info: who holds the lock, for how long, and how many live waiters
-- are queued. Writes nothing.
-- KEYS[1] lock, KEYS[2] waiters
-- reply: {holder's token (false if free), its fence, its PTTL in ms, live
-- waiters}.
local holder = redis.call('HMGET', KEYS[1], 'token', 'fence')
local pttl = -1
if holder[1] then
  pttl = redis.call('PTTL', KEYS[1])
end
return {holder[1], tonumber(holder[2]) or 0, pttl, q_live(KEYS[2], now_ms())}
