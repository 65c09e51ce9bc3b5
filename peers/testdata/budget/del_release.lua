-- del_release: a release that keeps no fence, as redislock's: the token
-- checked, the key deleted (a design measured).
-- KEYS[1] lock; ARGV[1] token
-- reply: 1 if released, 0 if not held
local v = redis.call('GET', KEYS[1])
local t = ARGV[1]
if not v or string.sub(v, 1, #t + 1) ~= t .. ' ' then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
