-- x1_release: x1_acquire's release (a design measured): the fence kept
-- for the retention in the lock's value, "- fence".
-- KEYS[1] lock; ARGV[1] token, ARGV[2] fence retention in ms
-- reply: 1 if released, 0 if not held
local v = redis.call('GET', KEYS[1])
local t = ARGV[1]
if not v or string.sub(v, 1, #t + 1) ~= t .. ' ' then
  return 0
end
local e = string.find(v, ' ', #t + 2, true)
redis.call('SET', KEYS[1], '- ' .. string.sub(v, #t + 2, e - 1), 'PX', ARGV[2])
return 1
