-- z_acquire: a design measured, not the library's: the fence is the
-- server's clock in microseconds at the grant, nothing is kept after a
-- release, and the lock is taken with SET NX (the key absent when free).
-- KEYS[1] lock; ARGV[1] token, ARGV[2] lease in ms
-- reply: the fence if taken, 0 if not
local t = redis.call('TIME')
local f = t[1] * 1000000 + t[2]
if redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. string.format('%d', f) .. ' 0', 'NX', 'PX', ARGV[2]) then
  return f
end
return 0
