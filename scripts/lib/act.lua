-- act: a partition's trie of buckets for activity (shared by the act_
-- scripts; see docs/activity.md). A node is named by its depth d and h's
-- prefix at d, h in two 32-bit halves hi and lo so that every number stays
-- exact: 'd.prefix' to depth 32, 'd.hi.prefix' below. A directory (a
-- hash) says 's' for a split node ('s0' or 's1' while only that half
-- holds ids), 'd' for a dense shard (depth 41); its field 'b' counts the
-- buckets and 'D' lists the dense shards' nodes, for counts.

-- act_int formats an integer below 2^53 without an exponent.
local function act_int(x)
  return string.format('%.0f', x)
end

-- act_node names the node at depth d on the path to h = hi * 2^32 + lo.
local function act_node(d, hi, lo)
  if d <= 32 then
    return d .. '.' .. act_int(math.floor(hi / 2 ^ (32 - d)))
  end
  return d .. '.' .. act_int(hi) .. '.' .. act_int(math.floor(lo / 2 ^ (64 - d)))
end

-- act_leaf finds the leaf on h's path in the directory dir: its depth, its
-- name and its directory value ('d' for a dense shard, else false). Split
-- nodes are prefix-closed (a node is split only if its parent is), so a
-- binary search over depths 4..64 finds the first one not split.
local function act_leaf(dir, hi, lo)
  local a, b, v = 4, 64, false
  while a < b do
    local mid = math.floor((a + b) / 2)
    local got = redis.call('HGET', dir, act_node(mid, hi, lo))
    if got and string.byte(got) == 115 then -- 's', 's0', 's1'
      a = mid + 1
    else
      b, v = mid, got
    end
  end
  if b == 64 then
    v = redis.call('HGET', dir, act_node(64, hi, lo))
  end
  return a, act_node(a, hi, lo), v
end

-- act_res is a member's (a signed decimal string's) value mod 10^12:
-- exact, for the difference of two members less than 10^12 apart.
local function act_res(m)
  local neg = string.sub(m, 1, 1) == '-'
  if neg then
    m = string.sub(m, 2)
  end
  local r = tonumber(string.sub(m, -12))
  if neg then
    r = -r
  end
  return r % 1e12
end

-- act_bits returns h's halves for a member (h - 2^63 in decimal), exactly:
-- the digits are carried into two 32-bit limbs.
local function act_bits(m)
  local neg = string.sub(m, 1, 1) == '-'
  if neg then
    m = string.sub(m, 2)
  end
  local hi, lo = 0, 0
  for i = 1, #m do
    lo = lo * 10 + string.byte(m, i) - 48
    local carry = math.floor(lo / 4294967296)
    lo = lo - carry * 4294967296
    hi = hi * 10 + carry
  end
  if not neg then
    return hi + 2147483648, lo
  elseif lo > 0 then
    return 2147483647 - hi, 4294967296 - lo
  end
  return 2147483648 - hi, 0
end

-- A directory that holds no bucket ('b' is 0) and some dense shards ('D')
-- is kept compact: without split nodes, which are then the paths from the
-- partition's root to the dense shards, as a count reads it (act_dirs).
-- Its trie is made whole again (act_unpack) before a bucket joins it.

-- act_compact deletes a directory's split nodes.
local function act_compact(dir)
  local all = redis.call('HGETALL', dir)
  local split = {}
  for i = 1, #all, 2 do
    if string.byte(all[i + 1]) == 115 then -- 's', 's0', 's1'
      split[#split + 1] = all[i]
    end
  end
  for i = 1, #split, 4000 do -- unpack's stack holds about 8,000 values
    redis.call('HDEL', dir, unpack(split, i, math.min(i + 3999, #split)))
  end
end

-- act_unpack writes a compact directory's split nodes: each dense shard's
-- path from depth 4 to 40, 's' where two paths part, else 's0' or 's1'
-- for the half that holds the path (the other is empty).
local function act_unpack(dir, dense)
  local halves, order = {}, {}
  for name in string.gmatch(dense, '%S+') do
    local hi, p = string.match(name, '^41%.(%d+)%.(%d+)$')
    hi, p = tonumber(hi), tonumber(p)
    local lo = p * 8388608 -- the shard's first h: p is lo's top 9 bits
    for d = 4, 40 do
      local node = act_node(d, hi, lo)
      local c = d + 1 <= 32 and math.floor(hi / 2 ^ (31 - d)) % 2 or math.floor(lo / 2 ^ (63 - d)) % 2
      if not halves[node] then
        halves[node] = {}
        order[#order + 1] = node
      end
      halves[node][c] = true
    end
  end
  local args = {}
  for _, node in ipairs(order) do
    local h = halves[node]
    args[#args + 1] = node
    args[#args + 1] = (h[0] and h[1]) and 's' or (h[0] and 's0' or 's1')
  end
  for i = 1, #args, 4000 do
    redis.call('HSET', dir, unpack(args, i, math.min(i + 3999, #args)))
  end
end

-- act_dense says whether the shard node is among a compact directory's
-- dense shards (dense: their nodes, separated by spaces).
local function act_dense(dense, shard)
  return string.find(' ' .. dense .. ' ', ' ' .. shard .. ' ', 1, true) ~= nil
end
