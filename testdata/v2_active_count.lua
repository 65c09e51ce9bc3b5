-- active_count: how many ids are active in any of the periods.
-- KEYS[1] a scratch key (same hash tag), KEYS[2..] the periods' bitmaps
-- reply: the population count of their OR.
--
-- One period: BITCOUNT it. Several: BITOP OR into the scratch key, count,
-- delete it, all before anyone else runs. Every period is type-checked
-- (STRLEN) before the first write, so a key of the wrong type changes
-- nothing; BITOP goes in chunks because unpack has a stack limit.
if #KEYS == 2 then
  return redis.call('BITCOUNT', KEYS[2])
end
for i = 2, #KEYS do
  redis.call('STRLEN', KEYS[i])
end
local chunk = 1000
for i = 2, #KEYS, chunk do
  local last = math.min(i + chunk - 1, #KEYS)
  if i == 2 then
    redis.call('BITOP', 'OR', KEYS[1], unpack(KEYS, i, last))
  else
    redis.call('BITOP', 'OR', KEYS[1], KEYS[1], unpack(KEYS, i, last))
  end
end
local n = redis.call('BITCOUNT', KEYS[1])
redis.call('DEL', KEYS[1])
return n
