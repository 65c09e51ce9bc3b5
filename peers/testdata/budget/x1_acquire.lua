-- x1_acquire: a design measured, not the library's: x0 with only what
-- its common path reads: one key, the token and the lease, a fence as the
-- reply (no table). The fence lives in the lock's value ("token fence
-- seq" held, "- fence" free: x1_release keeps it for the retention).
-- KEYS[1] lock; ARGV[1] token, ARGV[2] lease in ms
-- reply: the fence if taken, 0 if not
local v = redis.call('GET', KEYS[1])
local f = 0
if v then
  if string.byte(v, 1) ~= 45 then return 0 end -- held: not '-'
  f = tonumber(string.sub(v, 3))
end
f = f + 1
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. string.format('%d', f) .. ' 0', 'PX', ARGV[2])
return f
