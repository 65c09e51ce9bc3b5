-- members_remove: remove members from a prefix-search set.
-- KEYS[1] sorted set
-- ARGV[1..n] members
-- reply: how many were there.
local removed = 0
for i = 1, #ARGV, 1000 do
  removed = removed + redis.call('ZREM', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return removed
