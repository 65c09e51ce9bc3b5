-- act_mark: mark ids active in one partition of a group's activity for a
-- period (docs/activity.md): each id into its leaf, a bucket split when it
-- passes the leaf size, a shard made dense when it reaches the dense size.
-- KEYS[1] the partition's directory for the period, KEYS[2] the partition's
--   key prefix (a leaf is KEYS[2] .. node .. the period's suffix of KEYS[1])
-- ARGV[1] the period's deadline in ms since the epoch (0: none) as the
--   index gave it, or -1 when the caller did not index the partition just
--   now: then an absent directory is not created
-- ARGV[2] the most ids a bucket holds, ARGV[3] the ids that make a shard
--   dense
-- ARGV[4..] three values an id: h's high and low 32 bits, and the member
--   (h - 2^63 in decimal)
-- reply: {-1} if the directory was absent and ARGV[1] is -1 (nothing
--   written); else {0, i...}: the positions (1-based) of ids whose shard is
--   dense, one a shard.
--
-- Every key the period makes here expires at the deadline that the
-- directory keeps ('t'), never later. A bucket's split and a shard's
-- switch happen inside this script, before anyone else runs.
-- (libraries)
local dir, prefix = KEYS[1], KEYS[2]
local sfx = string.sub(dir, #prefix + 1)
local most, dense_at = tonumber(ARGV[2]), tonumber(ARGV[3])
local deadline = redis.call('HGET', dir, 't')
if not deadline then
  if ARGV[1] == '-1' then
    return {-1}
  end
  deadline = ARGV[1]
  redis.call('HSET', dir, 't', deadline)
  if deadline ~= '0' then
    redis.call('PEXPIREAT', dir, deadline)
  end
end

local function made(key)
  if deadline ~= '0' then
    redis.call('PEXPIREAT', key, deadline)
  end
end

local SHARD = 8388608 -- 2^23: h's low 23 bits are the id's offset in its shard

-- split divides the bucket at node (depth d) of key in two by h's next
-- bit, again while a half holds more than most ids. hi, lo: a place in
-- the node; resb: the shard's base mod 10^12, for nodes at depth 41 and
-- below, whose members differ from the id marked only in their offset.
local function split(d, node, key, hi, lo, resb)
  local halves, order, members = {}, {}, redis.call('SMEMBERS', key)
  for _, m in ipairs(members) do
    local mh, ml
    if d >= 41 then
      mh, ml = hi, lo - lo % SHARD + (act_res(m) - resb) % 1e12
    else
      mh, ml = act_bits(m)
    end
    local child = act_node(d + 1, mh, ml)
    if not halves[child] then
      halves[child] = {hi = mh, lo = ml, res = resb}
      if d < 41 then -- the child's shard, in case it is one
        halves[child].res = (act_res(m) - ml % SHARD) % 1e12
      end
      order[#order + 1] = child
    end
    local h = halves[child]
    h[#h + 1] = m
  end
  redis.call('DEL', key)
  redis.call('HSET', dir, node, 's')
  if d == 41 then -- from now on the shard's ids are counted as they come
    redis.call('HSET', dir, 'c' .. node, #members)
  end
  for _, child in ipairs(order) do
    local h, ckey = halves[child], prefix .. child .. sfx
    redis.call('SADD', ckey, unpack(h))
    made(ckey)
    if #h > most then
      split(d + 1, child, ckey, h.hi, h.lo, h.res)
    end
  end
end

-- densify makes the shard at node (depth 41) a bitmap of its ids: every
-- bucket under it is read and deleted, with the split nodes below it.
local function densify(shard, hi, lo, resb)
  local offsets, stack = {}, {{41, math.floor(lo / SHARD)}}
  while #stack > 0 do
    local top = table.remove(stack)
    local d, p = top[1], top[2] -- p: lo's top d - 32 bits
    local node = d .. '.' .. act_int(hi) .. '.' .. act_int(p)
    if d > 41 and redis.call('HGET', dir, node) == 's' then
      redis.call('HDEL', dir, node)
      stack[#stack + 1] = {d + 1, p * 2}
      stack[#stack + 1] = {d + 1, p * 2 + 1}
    elseif d == 41 and redis.call('HGET', dir, node) == 's' then
      stack[#stack + 1] = {d + 1, p * 2}
      stack[#stack + 1] = {d + 1, p * 2 + 1}
    else
      local key = prefix .. node .. sfx
      for _, m in ipairs(redis.call('SMEMBERS', key)) do
        offsets[#offsets + 1] = (act_res(m) - resb) % 1e12
      end
      redis.call('DEL', key)
    end
  end
  local key = prefix .. shard .. sfx
  redis.call('SETBIT', key, 8388095, 0) -- made whole at once, as v3's shards
  for _, o in ipairs(offsets) do
    redis.call('SETBIT', key, o, 1)
  end
  made(key)
  redis.call('HSET', dir, shard, 'd')
  redis.call('HDEL', dir, 'c' .. shard)
end

local dense, seen = {0}, {}
for i = 4, #ARGV, 3 do
  local hi, lo, m = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), ARGV[i + 2]
  local d, node, v = act_leaf(dir, hi, lo)
  local key = prefix .. node .. sfx
  local shard = d >= 41 and act_node(41, hi, lo)
  if v == 'd' then
    redis.call('SETBIT', key, lo % SHARD, 1)
  elseif redis.call('SADD', key, m) == 1 then
    local n = redis.call('SCARD', key)
    if n == 1 then
      made(key)
    end
    local resb = (act_res(m) - lo % SHARD) % 1e12
    local c
    if d > 41 then
      c = redis.call('HINCRBY', dir, 'c' .. shard, 1)
    elseif d == 41 and n > most then
      c = n
    end
    if c and c >= dense_at then
      densify(shard, hi, lo, resb)
      v = 'd'
    elseif n > most then
      split(d, node, key, hi, lo, resb)
    end
  end
  if v == 'd' and not seen[shard] then
    seen[shard] = true
    dense[#dense + 1] = (i - 1) / 3
  end
end
return dense
