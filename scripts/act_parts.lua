-- act_parts: the partitions of a group's activity used in any (OR) or in
-- every (AND) one of some periods.
-- KEYS[1..n] the periods' indexes (act_index), distinct
-- ARGV[1] 'OR' or 'AND'
-- reply: the partitions, in the order first seen.
local seen, order = {}, {}
for i = 1, #KEYS do
  local fields = redis.call('HGETALL', KEYS[i])
  if ARGV[1] == 'AND' and #fields == 0 then
    return {}
  end
  for j = 1, #fields, 2 do
    local p = fields[j]
    if p ~= 't' then
      if not seen[p] then
        seen[p] = 0
        order[#order + 1] = p
      end
      seen[p] = seen[p] + 1
    end
  end
end
local out = {}
for _, p in ipairs(order) do
  if ARGV[1] == 'OR' or seen[p] == #KEYS then
    out[#out + 1] = tonumber(p)
  end
end
return out
