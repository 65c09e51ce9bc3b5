-- g_acquire: a design measured, not the library's: design f with its flag
-- at a fixed place, so that no search is needed: a free value is "-
-- fence" when nobody waits and no abandon mark stands, "+ fence" when
-- someone does (the full script); a held one is "token - fence seq" or
-- "token + fence seq". An absent key: the fence from the clock.
-- KEYS[1] lock; ARGV[1] token, ARGV[2] lease in ms
-- reply: the fence if taken, 0 if the full script must decide
local v = redis.call('GET', KEYS[1])
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
redis.call('SET', KEYS[1], ARGV[1] .. ' - ' .. string.format('%d', f) .. ' 0', 'PX', ARGV[2])
return f
