-- zm_release: design z's release read with MGET (no WRONGTYPE at a
-- flagged hash): the token checked, the key deleted, no fence kept.
-- KEYS[1] lock; ARGV[1] token, ARGV[2] wake prefix, ARGV[3] engine id
-- reply: 1 if released, 0 if not held
local v = redis.call('MGET', KEYS[1])[1]
local t = ARGV[1]
if not v or string.sub(v, 1, #t + 1) ~= t .. ' ' then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
