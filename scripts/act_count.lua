-- act_count: how many ids of some units of one partition are active in
-- any (OR) or in every (AND) one of some periods (docs/activity.md). In
-- each period a unit is some buckets (sets of members) and some dense
-- shards (bitmaps), which together cover exactly the unit's range.
-- KEYS[1] the partition's scratch prefix (scratch keys are KEYS[1] .. n,
--   'x' and 'u', deleted before the script returns), KEYS[2..] the units' buckets and
--   bitmaps, in the order ARGV describes them
-- ARGV[1] 'OR' or 'AND'
-- ARGV[2..] for each unit: the number of periods, then for each period:
--   its number of buckets, its number of bitmaps, and each bitmap's base
--   (the member of its shard's offset 0)
-- reply: the units' total count.
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

-- bitcount counts the OR or AND of bitmaps, 16 at a time as v3 did.
local function bitcount(keys)
  if #keys == 1 then
    return redis.call('BITCOUNT', keys[1])
  end
  local s = scratch()
  redis.call('BITOP', op, s, unpack(keys, 1, math.min(16, #keys)))
  for i = 17, #keys, 15 do
    redis.call('BITOP', op, s, s, unpack(keys, i, math.min(i + 14, #keys)))
  end
  return redis.call('BITCOUNT', s)
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
local function mixed(periods)
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
      n = n + bitcount(keys)
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
      n = n + bitcount(keys)
    end
  end
  return n
end

-- count adds up the units ARGV describes.
local function count()
  local total, ki, ai = 0, 2, 2
  while ai <= #ARGV do
    local periods, anyb, anyd = {}, false, false
    for i = 1, tonumber(ARGV[ai]) do
      local nb, nd = tonumber(ARGV[ai + 1]), tonumber(ARGV[ai + 2])
      ai = ai + 2
      local p = {b = {}, d = {}, base = {}}
      for j = 1, nb do
        p.b[j], ki = KEYS[ki], ki + 1
      end
      for j = 1, nd do
        p.d[j], p.base[j], ki, ai = KEYS[ki], ARGV[ai + 1], ki + 1, ai + 1
      end
      anyb, anyd = anyb or nb > 0, anyd or nd > 0
      periods[i] = p
    end
    ai = ai + 1
    if not anyd then
      total = total + sparse(periods)
    else
      total = total + mixed(periods)
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

-- A command that fails (a key of the wrong type) ends the count with its
-- error, and no scratch key stays.
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
