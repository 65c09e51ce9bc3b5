-- bits_shards: the shards of a group's bitmap used in any (OR) or in every
-- (AND) one of some periods.
-- KEYS[1..n] the periods' indexes (bits_index), distinct
-- ARGV[1] 'OR' or 'AND'
-- reply: the shard numbers, in the order first seen.
local seen, order = {}, {}
for i = 1, #KEYS do
  local shards = redis.call('ZRANGE', KEYS[i], 0, -1)
  if ARGV[1] == 'AND' and #shards == 0 then
    return {}
  end
  for _, shard in ipairs(shards) do
    if not seen[shard] then
      seen[shard] = 0
      order[#order + 1] = shard
    end
    seen[shard] = seen[shard] + 1
  end
end
if ARGV[1] == 'OR' then
  return order
end
local all = {}
for _, shard in ipairs(order) do
  if seen[shard] == #KEYS then
    all[#all + 1] = shard
  end
end
return all
