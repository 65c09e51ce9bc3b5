-- act_count: how many ids of some units of one partition are active in
-- any (OR) or in every (AND) one of some periods (docs/activity.md). In
-- each period a unit is some buckets (sets of members) and some dense
-- shards (bitmaps), which together cover exactly the unit's range.
-- KEYS[1] the partition's scratch prefix (scratch keys are KEYS[1] .. n,
--   'x' and 'u', deleted before the script returns), KEYS[2..] the units' buckets,
--   filtered buckets and bitmaps, in the order ARGV describes them
-- ARGV[1] 'OR' or 'AND'
-- ARGV[2..] for each unit: for a unit that lies under a leaf of some
--   period's trie, 'r', its least and greatest members, and its first bit
--   and its number of bits in its shard (0, 0 for a unit of whole shards);
--   then the number of periods, then for each period: its number of
--   buckets, of buckets above the unit (whose members outside the unit's
--   range are not counted), of bitmaps (of a shard above the unit: only
--   the unit's bits count), and each bitmap's base (the member of its
--   shard's offset 0)
-- reply: the units' total count, or -1 when a planned key is gone (a mark
--   split a bucket or made a shard dense since the plan: nothing is
--   counted, and the engine plans the units again).
-- (libraries)
local op = ARGV[1]
local made = {}

local function scratch()
  local key = KEYS[1] .. (#made + 1)
  made[#made + 1] = key
  return key
end

-- intercard is the size of the keys' intersection (SINTERCARD from Redis
-- 7, else SINTERSTORE into a scratch key).
local function intercard(keys)
  local n = redis.pcall('SINTERCARD', #keys, unpack(keys))
  if type(n) == 'number' then
    return n
  end
  local s = scratch()
  redis.call('SINTERSTORE', s, unpack(keys))
  return redis.call('SCARD', s)
end

-- unionstore stores in dest the union of first (nil: none) and keys, 4,000
-- keys a command (unpack's stack holds about 8,000 values: a unit may hold
-- more buckets), and returns its size.
local function unionstore(dest, first, keys)
  local n = 0
  for i = 1, #keys, 4000 do
    local from = dest
    if i == 1 then
      from = first
    end
    local part = {unpack(keys, i, math.min(i + 3999, #keys))}
    if from then
      n = redis.call('SUNIONSTORE', dest, from, unpack(part))
    else
      n = redis.call('SUNIONSTORE', dest, unpack(part))
    end
  end
  return n
end

-- union is a key holding the union of keys (one key: itself).
local function union(keys)
  if #keys == 1 then
    return keys[1]
  end
  local s = scratch()
  unionstore(s, nil, keys)
  return s
end

-- bitcount counts the OR or AND of bitmaps, 16 at a time as v3 did, in
-- the unit's bits of its shard if it has a range below a shard.
local function bitcount(keys, rng)
  local s = keys[1]
  if #keys > 1 then
    s = scratch()
    redis.call('BITOP', op, s, unpack(keys, 1, math.min(16, #keys)))
    for i = 17, #keys, 15 do
      redis.call('BITOP', op, s, s, unpack(keys, i, math.min(i + 14, #keys)))
    end
  end
  if not rng or rng.size == 0 then
    return redis.call('BITCOUNT', s)
  end
  if rng.size >= 8 then
    return redis.call('BITCOUNT', s, act_int(rng.from / 8), act_int((rng.from + rng.size) / 8 - 1))
  end
  local n = 0
  for o = rng.from, rng.from + rng.size - 1 do
    n = n + redis.call('GETBIT', s, o)
  end
  return n
end

-- below is whether member a is less than member b (signed decimal
-- strings, exactly: two 10-digit halves where the lengths are equal).
local function below(a, b)
  local na, nb = string.byte(a) == 45, string.byte(b) == 45
  if na ~= nb then
    return na
  end
  if na then -- (two statements: gopher-lua, miniredis's Lua, assigns a
    -- before it reads it for b)
    local neg = a
    a = string.sub(b, 2)
    b = string.sub(neg, 2)
  end
  if #a ~= #b then
    return #a < #b
  end
  local x, y = tonumber(string.sub(a, 1, 10)), tonumber(string.sub(b, 1, 10))
  if x ~= y or #a <= 10 then
    return x < y
  end
  return tonumber(string.sub(a, 11)) < tonumber(string.sub(b, 11))
end

-- members caches a bucket's members for the script, each beside its
-- value as a number (exact to ±1,024 near ±2^63): a bucket above a unit
-- divided in parts is read once for all the parts in the script.
local cache = {}
local function members(key)
  local got = cache[key]
  if not got then
    got = {}
    for i, m in ipairs(redis.call('SMEMBERS', key)) do
      got[i] = {m, tonumber(m)}
    end
    cache[key] = got
  end
  return got
end

-- filter stores in a scratch set the members of a bucket above the unit
-- that lie in its range, and returns the set (nil: none). Numbers decide
-- where they are more than 4,096 apart (two roundings of at most 1,024);
-- below decides the rest.
local function filter(key, rng)
  local kept = {}
  for _, e in ipairs(members(key)) do
    local n, inside = e[2], nil
    if n > rng.lowN + 4096 and n < rng.highN - 4096 then
      inside = true
    elseif n < rng.lowN - 4096 or n > rng.highN + 4096 then
      inside = false
    else
      inside = not below(e[1], rng.low) and not below(rng.high, e[1])
    end
    if inside then
      kept[#kept + 1] = e[1]
    end
  end
  if #kept == 0 then
    return nil
  end
  local s = scratch()
  for j = 1, #kept, 4000 do
    redis.call('SADD', s, unpack(kept, j, math.min(j + 3999, #kept)))
  end
  return s
end

-- orKeys are the OR's two scratch keys, made at its first union of two
-- buckets or more and kept to the script's end: a set holding one member
-- that is no integer, and the union, which each SUNIONSTORE replaces.
local orKeys

local function sparse(periods)
  if op == 'OR' then
    local all = {}
    for _, p in ipairs(periods) do
      for _, k in ipairs(p.b) do
        all[#all + 1] = k
      end
    end
    if #all <= 1 then
      return #all == 0 and 0 or redis.call('SCARD', all[1])
    end
    -- The union starts with a member that is no integer, so that it is a
    -- hash table from the start: grown as an intset to 512, it would cost
    -- twice as much (a realloc and a memmove an id). SUNIONSTORE replies
    -- the union's size.
    if not orKeys then
      redis.call('SADD', KEYS[1] .. 'x', 'x')
      orKeys = {KEYS[1] .. 'x', KEYS[1] .. 'u'}
    end
    return unionstore(orKeys[2], orKeys[1], all) - 1
  end
  local each = {}
  for i, p in ipairs(periods) do
    if #p.b == 0 then
      return 0
    end
    each[i] = union(p.b)
  end
  return intercard(each)
end

-- mixed counts a unit with dense shards in some period: every bucket's
-- members are sorted into the shards' ranges (a bitmap each) and the rest
-- (a set).
local function mixed(periods, rng)
  local shards, order = {}, {}
  for _, p in ipairs(periods) do
    for j, base in ipairs(p.base) do
      if not shards[base] then
        shards[base] = {num = tonumber(base), res = act_res(base), keys = {}}
        order[#order + 1] = base
      end
    end
  end
  local rest, bits = {}, {}
  for i, p in ipairs(periods) do
    rest[i], bits[i] = {}, {}
    for j, base in ipairs(p.base) do
      bits[i][base] = p.d[j]
    end
    for _, key in ipairs(p.b) do
      for _, m in ipairs(redis.call('SMEMBERS', key)) do
        local into, o = nil, nil
        local num = tonumber(m)
        for _, base in ipairs(order) do
          local s = shards[base]
          if math.abs(num - s.num) < 1e11 then
            o = (act_res(m) - s.res) % 1e12
            if o < 8388096 then
              into = base
              break
            end
          end
        end
        if into then
          local key = bits[i][into]
          if not key then -- a period's own bitmap for the shard, or for OR one for all
            key = op == 'OR' and shards[into].scratch or scratch()
            shards[into].scratch = key
            bits[i][into] = key
          end
          redis.call('SETBIT', key, o, 1)
        else
          rest[i][#rest[i] + 1] = m
        end
      end
    end
  end
  local n = 0
  if op == 'OR' then
    local all = scratch()
    for i = 1, #periods do
      for j = 1, #rest[i], 4000 do
        redis.call('SADD', all, unpack(rest[i], j, math.min(j + 3999, #rest[i])))
      end
    end
    n = redis.call('SCARD', all)
    for _, base in ipairs(order) do
      local keys, seen = {}, {}
      for i = 1, #periods do
        local k = bits[i][base]
        if k and not seen[k] then
          seen[k] = true
          keys[#keys + 1] = k
        end
      end
      n = n + bitcount(keys, rng)
    end
    return n
  end
  local sets = {}
  for i = 1, #periods do
    if #rest[i] == 0 then
      sets = nil
      break
    end
    sets[i] = scratch()
    for j = 1, #rest[i], 4000 do
      redis.call('SADD', sets[i], unpack(rest[i], j, math.min(j + 3999, #rest[i])))
    end
  end
  if sets then
    n = intercard(sets)
  end
  for _, base in ipairs(order) do
    local keys = {}
    for i = 1, #periods do
      keys[i] = bits[i][base]
      if not keys[i] then
        keys = nil
        break
      end
    end
    if keys then
      n = n + bitcount(keys, rng)
    end
  end
  return n
end

-- count adds up the units ARGV describes, or returns -1 if a planned key
-- is gone.
local function count()
  for i = 2, #KEYS, 4000 do
    local last = math.min(i + 3999, #KEYS)
    if redis.call('EXISTS', unpack(KEYS, i, last)) ~= last - i + 1 then
      return -1
    end
  end
  local total, ki, ai = 0, 2, 2
  while ai <= #ARGV do
    local rng
    if ARGV[ai] == 'r' then
      rng = {low = ARGV[ai + 1], high = ARGV[ai + 2], from = tonumber(ARGV[ai + 3]), size = tonumber(ARGV[ai + 4])}
      rng.lowN, rng.highN = tonumber(rng.low), tonumber(rng.high)
      ai = ai + 5
    end
    local periods, anyd = {}, false
    for i = 1, tonumber(ARGV[ai]) do
      local nb, nf, nd = tonumber(ARGV[ai + 1]), tonumber(ARGV[ai + 2]), tonumber(ARGV[ai + 3])
      ai = ai + 3
      local p = {b = {}, d = {}, base = {}}
      for j = 1, nb do
        p.b[j], ki = KEYS[ki], ki + 1
      end
      for _ = 1, nf do
        p.b[#p.b + 1] = filter(KEYS[ki], rng)
        ki = ki + 1
      end
      for j = 1, nd do
        p.d[j], p.base[j], ki, ai = KEYS[ki], ARGV[ai + 1], ki + 1, ai + 1
      end
      anyd = anyd or nd > 0
      periods[i] = p
    end
    ai = ai + 1
    if not anyd then
      total = total + sparse(periods)
    else
      total = total + mixed(periods, rng)
    end
    if #made > 0 then
      redis.call('DEL', unpack(made))
      made = {}
    end
  end
  if ki ~= #KEYS + 1 then
    error({err = 'ERR act_count: ' .. (ki - 2) .. ' keys described, ' .. (#KEYS - 1) .. ' given'})
  end
  return total
end

-- A command that fails (a key of the wrong type: a planned bucket that a
-- mark made a dense shard's bitmap since, or a key that is not
-- activity's) ends the count with its error, and no scratch key stays.
local ok, res = pcall(count)
for _, keys in ipairs({made, orKeys or {}}) do
  if #keys > 0 then
    redis.call('DEL', unpack(keys))
  end
end
if not ok then
  if type(res) == 'table' then
    return res
  end
  -- a Lua error (or, in some servers, a command's error) is a string led
  -- by the script's position: the reply keeps the error's code
  local msg = string.gsub(tostring(res), '^[^ ]*:%d+: ', '')
  if not string.match(msg, '^%u+ ') then
    msg = 'ERR ' .. msg
  end
  return redis.error_reply(msg)
end
return res
