-- x1_release_keepttl: x1_release keeping the lease's expiry (KEEPTTL), not
-- the retention: the fence then outlives its holder only by what was left
-- of the lease (a design measured).
-- KEYS[1] lock; ARGV[1] token, ARGV[2] fence retention in ms (not used)
-- reply: 1 if released, 0 if not held
local v = redis.call('GET', KEYS[1])
local t = ARGV[1]
if not v or string.sub(v, 1, #t + 1) ~= t .. ' ' then
  return 0
end
local e = string.find(v, ' ', #t + 2, true)
redis.call('SET', KEYS[1], '- ' .. string.sub(v, #t + 2, e - 1), 'KEEPTTL')
return 1
