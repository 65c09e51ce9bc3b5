-- xd_acquire: x1 with every key its slow path would touch declared, as
-- principle 3 asks (the lock, the old counter, the queue, the waiters, the
-- token's abandon mark), and the engine's constants packed in one
-- argument; the common path reads none of them (a design measured: a
-- waiter would mark the value, "- fence +", so a plain free value
-- means nobody waits and no token was abandoned).
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] waiters,
-- KEYS[5] the token's abandon mark; ARGV[1] token, ARGV[2] mode, ARGV[3]
-- lease in ms, ARGV[4] "entry retention engine wake" (not read here)
-- reply: the fence if taken, 0 if not
local v = redis.call('GET', KEYS[1])
local f = 0
if v then
  if string.byte(v, 1) ~= 45 or string.byte(v, -1) == 43 then return 0 end -- held, or marked '+'
  f = tonumber(string.sub(v, 3))
end
f = f + 1
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. string.format('%d', f) .. ' 0', 'PX', ARGV[3])
return f
