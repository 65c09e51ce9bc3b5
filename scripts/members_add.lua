-- members_add: add members to a prefix-search set, all with score 0 so that
-- the set is ordered by the members' bytes.
-- KEYS[1] sorted set
-- ARGV[1..n] members
-- reply: how many were new.
local added = 0
for i = 1, #ARGV, 1000 do -- ZADD in chunks: unpack has a stack limit
  local args = {}
  for j = i, math.min(i + 999, #ARGV) do
    args[#args + 1] = 0
    args[#args + 1] = ARGV[j]
  end
  added = added + redis.call('ZADD', KEYS[1], unpack(args))
end
return added
