-- x1v_acquire: x1_acquire reading the token's abandon mark, its key built
-- in the script (a design measured; the library's principle 3 forbids
-- keys not passed in KEYS).
-- KEYS[1] lock; ARGV[1] token, ARGV[2] lease in ms
-- reply: the fence if taken, 0 if not, -2 if the token was abandoned
local v = redis.call('GET', KEYS[1])
local f = 0
if v then
  if string.byte(v, 1) ~= 45 then return 0 end
  f = tonumber(string.sub(v, 3))
end
if redis.call('EXISTS', KEYS[1] .. ':void:' .. ARGV[1]) == 1 then return -2 end
f = f + 1
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. string.format('%d', f) .. ' 0', 'PX', ARGV[2])
return f
