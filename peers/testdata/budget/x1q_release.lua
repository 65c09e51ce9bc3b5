-- x1q_release: x1_release reading the queue's length, its key built in
-- the script (a design measured; see x1v_acquire).
-- KEYS[1] lock; ARGV[1] token, ARGV[2] fence retention in ms
-- reply: 1 if released, 0 if not held, 2 if waiters are queued
local v = redis.call('GET', KEYS[1])
local t = ARGV[1]
if not v or string.sub(v, 1, #t + 1) ~= t .. ' ' then
  return 0
end
if redis.call('ZCARD', KEYS[1] .. ':queue') > 0 then return 2 end
local e = string.find(v, ' ', #t + 2, true)
redis.call('SET', KEYS[1], '- ' .. string.sub(v, #t + 2, e - 1), 'PX', ARGV[2])
return 1
