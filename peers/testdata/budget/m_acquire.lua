-- m_acquire: a design measured, not the library's: the lock's one key is
-- a string while nothing is flagged ("token fence seq" held, its lease the
-- key's PX; "- fence" free, kept for the rest of the lease) and a hash
-- while a waiter or an abandon mark flags it (design hp's slow path). MGET
-- reads the string without failing at a hash (a hash reads as nil, and
-- HGET tells it from no key), so no call meets WRONGTYPE.
-- KEYS[1] lock; ARGV[1] token, ARGV[2] lease in ms
-- reply: the fence if taken, 0 if not
local v = redis.call('MGET', KEYS[1])[1]
local f
if not v then
  if redis.call('HGET', KEYS[1], 'v') then return 0 end -- flagged: the slow path
  local t = redis.call('TIME')
  f = tonumber(t[1]) * 1000000 + tonumber(t[2])
elseif string.byte(v, 1) == 45 and string.byte(v, 2) == 32 then
  f = tonumber(string.sub(v, 3)) + 1
end
if f then
  redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. string.format('%.0f', f) .. ' 0', 'PX', ARGV[2])
  return f
end
return 0
