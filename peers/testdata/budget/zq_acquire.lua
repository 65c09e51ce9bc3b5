-- zq_acquire: z_acquire that first reads the queue and the token's abandon
-- mark, their keys built in the script (a design measured; see
-- x1v_acquire).
-- KEYS[1] lock; ARGV[1] token, ARGV[2] lease in ms
-- reply: the fence if taken, 0 if not, -2 if waiters are queued or the
-- token was abandoned
if redis.call('EXISTS', KEYS[1] .. ':queue', KEYS[1] .. ':void:' .. ARGV[1]) > 0 then return -2 end
local t = redis.call('TIME')
local f = t[1] * 1000000 + t[2]
if redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. string.format('%d', f) .. ' 0', 'NX', 'PX', ARGV[2]) then
  return f
end
return 0
