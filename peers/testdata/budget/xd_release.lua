-- xd_release: xd_acquire's release (a design measured), its keys declared:
-- a holder's value a waiter marked would take the slow path.
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] waiters;
-- ARGV[1] token, ARGV[2] fence retention in ms, ARGV[3] "wake engine"
-- (not read here)
-- reply: 1 if released, 0 if not held
local v = redis.call('GET', KEYS[1])
local t = ARGV[1]
if not v or string.sub(v, 1, #t + 1) ~= t .. ' ' then
  return 0
end
local e = string.find(v, ' ', #t + 2, true)
redis.call('SET', KEYS[1], '- ' .. string.sub(v, #t + 2, e - 1), 'PX', ARGV[2])
return 1
