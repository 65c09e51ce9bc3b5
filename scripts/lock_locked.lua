-- lock_locked: whether anyone holds the lock.
-- KEYS[1] the lock's hash (lib/lock.lua)
-- reply: 1 if held, 0 if free. HGET (not EXISTS) so a key of the wrong
-- type is an error rather than a lock that looks held forever.
local v = redis.call('HGET', KEYS[1], 'v')
if not v or string.sub(v, 1, 2) == '- ' or string.sub(v, 1, 3) == '+- ' then
  return 0
end
if string.byte(v, 1) == 43 then -- flagged: the lease's end is in 'd'
  local t = redis.call('TIME')
  if (tonumber(redis.call('HGET', KEYS[1], 'd')) or 0) <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
    return 0
  end
end
return 1
