-- act_dirs: the tries of one partition of a group's activity in some
-- periods.
-- KEYS[1..n] the partition's directories, one per period
-- reply: for each period, its directory as HGETALL gives it (field, value,
--   ...: nodes 's', 's0', 's1' or 'd', counts 'c<node>', the deadline
--   't'), or 0 for a period without one. (The engine picks the nodes: a
--   loop here over the fields cost more than the rest of the script.)
local out = {}
for i = 1, #KEYS do
  local all = redis.call('HGETALL', KEYS[i])
  if #all == 0 then
    out[i] = 0
  else
    out[i] = all
  end
end
return out
