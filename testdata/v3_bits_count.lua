-- bits_count: how many ids of one shard are active in any (OR) or in every
-- (AND) one of some periods.
-- KEYS[1] a scratch key (the shard's hash tag), KEYS[2..] the shard's
--   bitmaps, one per period, distinct
-- ARGV[1] 'OR' or 'AND'
-- reply: the population count of their OR or AND.
--
-- Every bitmap is type-checked (STRLEN) before the first write, so a key of
-- the wrong type changes nothing. An absent bitmap reads as zeros: OR
-- leaves it out, AND is 0. One bitmap left: BITCOUNT it. Several: BITOP
-- into the scratch key, count, delete it, all before anyone else runs.
-- BITOP takes at most 16 keys at a time, the most its word-at-a-time path
-- takes (more go byte by byte, many times slower).
local op, keys = ARGV[1], {}
for i = 2, #KEYS do
  if redis.call('STRLEN', KEYS[i]) > 0 then
    keys[#keys + 1] = KEYS[i]
  elseif op == 'AND' then
    return 0
  end
end
if #keys == 0 then
  return 0
elseif #keys == 1 then
  return redis.call('BITCOUNT', keys[1])
end
redis.call('BITOP', op, KEYS[1], unpack(keys, 1, math.min(16, #keys)))
for i = 17, #keys, 15 do
  redis.call('BITOP', op, KEYS[1], KEYS[1], unpack(keys, i, math.min(i + 14, #keys)))
end
local n = redis.call('BITCOUNT', KEYS[1])
redis.call('DEL', KEYS[1])
return n
