-- hpg_acquire: a design measured, not the library's: design hp with its
-- flag at a fixed place, as design g's: 'v' free is "- fence" when
-- nobody waits and no abandon mark stands, "+ fence" when someone does
-- (the slow path); held, "token - fence seq" or "token + fence seq".
-- KEYS[1] the name's hash; ARGV[1] token, ARGV[2] lease in ms
-- reply: the fence if taken, 0 if not (or flagged: the slow path)
local v = redis.call('HGET', KEYS[1], 'v')
local f
if v then
  if string.byte(v, 1) ~= 45 or string.byte(v, 2) ~= 32 then
    return 0
  end
  f = tonumber(string.sub(v, 3)) + 1
else
  local t = redis.call('TIME')
  f = t[1] * 1000000 + t[2]
end
redis.call('HSET', KEYS[1], 'v', ARGV[1] .. ' - ' .. string.format('%d', f) .. ' 0')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return f
