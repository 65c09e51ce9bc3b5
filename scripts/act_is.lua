-- act_is: whether an id is marked in a group's activity for a period.
-- KEYS[1] the id's partition's directory for the period, KEYS[2] the
--   partition's key prefix (as for act_mark)
-- ARGV[1] h's high 32 bits, ARGV[2] its low 32 bits, ARGV[3] the member
-- reply: 1 or 0.
-- (libraries)
local hi, lo = tonumber(ARGV[1]), tonumber(ARGV[2])
local d, node, v = act_leaf(KEYS[1], hi, lo)
if d == 4 and not v then -- the root: one bucket, or a compact directory
  local got = redis.call('HMGET', KEYS[1], 'b', 'D')
  if got[1] == '0' and got[2] then
    node = act_node(41, hi, lo)
    if not act_dense(got[2], node) then
      return 0
    end
    v = 'd'
  end
end
local key = KEYS[2] .. node .. string.sub(KEYS[1], #KEYS[2] + 1)
if v == 'd' then
  return redis.call('GETBIT', key, lo % 8388608)
end
return redis.call('SISMEMBER', key, ARGV[3])
