-- act_dirs: the tries of one partition of a group's activity in some
-- periods.
-- KEYS[1..n] the partition's directories, one per period
-- reply: for each period, its split and dense nodes as a flat list of
--   node, 's' (split; 's0' or 's1' while only that half holds ids) or 'd'
--   (dense); 0 for a period without a directory.
local out = {}
for i = 1, #KEYS do
  local all = redis.call('HGETALL', KEYS[i])
  if #all == 0 then
    out[i] = 0
  else
    local nodes = {}
    for j = 1, #all, 2 do
      local v = all[j + 1]
      if string.byte(v) == 115 or v == 'd' then -- 's', 's0', 's1', 'd'
        nodes[#nodes + 1] = all[j]
        nodes[#nodes + 1] = v
      end
    end
    out[i] = nodes
  end
end
return out
