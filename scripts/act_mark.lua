-- act_mark: mark ids active in one partition of a group's activity for a
-- period (docs/activity.md): each id into its leaf, a bucket split when it
-- passes the leaf size, a shard made dense once it reaches the dense size:
-- its bitmap is built over several scripts, a bounded step each, while
-- its buckets stay what counts read, then it switches in one step.
-- KEYS[1] the partition's directory for the period, KEYS[2] the partition's
--   key prefix (a leaf is KEYS[2] .. node .. the period's suffix of KEYS[1])
-- ARGV[1] the period's deadline in ms since the epoch (0: none) as the
--   index gave it, or -1 when the caller did not index the partition just
--   now: then an absent directory is not created; nor is it when that
--   deadline has passed (the index gave it before the period ended)
-- ARGV[2] the most ids a bucket holds, ARGV[3] the ids that make a shard
--   dense, ARGV[4] the most ids a script copies into the bitmaps of shards
--   turning dense (a step), ARGV[5] the most work a script does (below)
-- ARGV[6..] three values an id: h's high and low 32 bits, and the member
--   (h - 2^63 in decimal); or, to take a step of the building of the
--   shard of h, '~' and the member of the shard's first place (offset 0)
-- reply: {-1} if the directory was absent and ARGV[1] is -1 or a deadline
--   passed (nothing written: the caller indexes the period again); else
--   {deadline, taken, i..., 0, j...}: the period's deadline (ms since the
--   epoch, 0 for none), how many of the ids (from the first) the script
--   marked before its work ran out (at least one: the caller sends the
--   rest again), the positions (1-based) of ids whose shard is dense, one
--   a shard, then 0 and the positions of ids whose shard's bitmap is still
--   being built, one a shard (the caller takes steps until it is dense).
--   A key of another type where an id goes fails the script with
--   WRONGTYPE: nothing is written when the directory was absent (the
--   partition's first bucket is checked first); in a directory that
--   exists, the ids before it stay marked.
--
-- Work is counted in units of about a microsecond of the server's time
-- (docs/activity.md): an id 2, and 8 more when its leaf is looked up; a
-- command 1; a member a split reads 2 (4 above depth 41, where it is
-- parsed from all its digits), one a step copies 3; a bitmap's bytes
-- written, a unit a KiB. A script takes no further id once its work
-- reaches ARGV[5], nor a step of a build, and a step takes no further
-- leaf; nor does it take an id that may split a full bucket, copy a leaf,
-- or make a bitmap whole, when that work would not fit in what is left,
-- unless it is its first id, or the first leaf or switch of a script of
-- steps alone. So a script's work is at most ARGV[5] and an id's or a
-- switch's last commands, or one undivided unit alone (a split, a leaf,
-- a bitmap loaded again made whole: roomy).
--
-- Every key the period makes here expires at the deadline that the
-- directory keeps ('t'), never later. A bucket's split and a shard's
-- switch happen inside this script, before anyone else runs.
-- (libraries)
local dir, prefix = KEYS[1], KEYS[2]
local sfx = string.sub(dir, #prefix + 1)
local most, dense_at, budget = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local work, most_work = 0, tonumber(ARGV[5])
local got = redis.call('HMGET', dir, 't', 'b')
local deadline, counted = got[1], got[2] ~= false
-- compact: a compact directory's dense shards (lib/act.lua), else false
local compact = false
if got[2] == '0' then
  compact = redis.call('HGET', dir, 'D') or false
end
if not deadline then
  local t = redis.call('TIME')
  if ARGV[1] == '-1' or ARGV[1] ~= '0' and tonumber(ARGV[1]) <= t[1] * 1000 + math.floor(t[2] / 1000) then
    return {-1} -- a directory made past its deadline would be deleted at once, and its keys kept
  end
  -- Every id here starts in the partition's first bucket: a key of
  -- another type there fails the mark before it writes the directory.
  local first = redis.pcall('SCARD', prefix .. act_node(4, tonumber(ARGV[6]), tonumber(ARGV[7])) .. sfx)
  if type(first) == 'table' and first.err then
    return first
  end
  deadline, counted = ARGV[1], true
  redis.call('HSET', dir, 't', deadline, 'b', 0)
  if deadline ~= '0' then
    redis.call('PEXPIREAT', dir, deadline)
  end
end

-- buckets adds n to the directory's count of buckets ('b'), which a
-- count reads to skip the paths of a partition that has only dense shards
-- (a directory made before 'b' has none, and keeps none).
local function buckets(n)
  if counted and n ~= 0 then
    redis.call('HINCRBY', dir, 'b', n)
  end
end

local function made(key)
  if deadline ~= '0' then
    redis.call('PEXPIREAT', key, deadline)
  end
end

local SHARD = 8388608 -- 2^23: h's low 23 bits are the id's offset in its shard

-- bit is bit k of h (0: the top), which picks the child at depth k + 1.
local function bit(k, hi, lo)
  if k < 32 then
    return math.floor(hi / 2 ^ (31 - k)) % 2
  end
  return math.floor(lo / 2 ^ (63 - k)) % 2
end

-- parting is the first bit, from bit d on, at which the entries' places
-- differ: that of the least and the greatest (they share h's first d
-- bits, and are distinct).
local function parting(d, entries)
  local a, b = entries[1], entries[1]
  for _, e in ipairs(entries) do
    if e[2] < a[2] or e[2] == a[2] and e[3] < a[3] then
      a = e
    elseif e[2] > b[2] or e[2] == b[2] and e[3] > b[3] then
      b = e
    end
  end
  local k = d
  while k < 63 and bit(k, a[2], a[3]) == bit(k, b[2], b[3]) do
    k = k + 1
  end
  return k
end

-- place puts entries ({member, hi, lo}: h's halves, exact) in the trie
-- at node (depth d): as one bucket if they fit, else the node is split and
-- each half placed again, by h's next bit. The nodes down to where the
-- entries part hold them all: each is split with one half empty ('s0' or
-- 's1' names the other, for counts), written in one HSET, so that ids that
-- share a long prefix (those of one shard) cost one pass, not one a
-- level. The shard node's count is kept from its split on.
local function place(d, node, entries)
  if #entries <= most then
    local members, key = {}, prefix .. node .. sfx
    for j, e in ipairs(entries) do
      members[j] = e[1]
    end
    redis.call('SADD', key, unpack(members))
    made(key)
    buckets(1)
    work = work + 3 + #members / 8
    return
  end
  local e1 = entries[1]
  local k = parting(d, entries)
  local fields = {}
  for depth = d, k do
    local n = depth == d and node or act_node(depth, e1[2], e1[3])
    fields[#fields + 1] = n
    fields[#fields + 1] = depth < k and 's' .. bit(depth, e1[2], e1[3]) or 's'
    if depth == 41 then
      fields[#fields + 1] = 'c' .. n
      fields[#fields + 1] = #entries
    end
  end
  redis.call('HSET', dir, unpack(fields))
  work = work + 1 + #fields / 8
  local halves = {{}, {}}
  for _, e in ipairs(entries) do
    local h = halves[bit(k, e[2], e[3]) + 1]
    h[#h + 1] = e
  end
  for c = 0, 1 do
    place(k + 1, act_node(k + 1, halves[c + 1][1][2], halves[c + 1][1][3]), halves[c + 1])
  end
end

-- split_work is about the work of a split at depth d (its members read,
-- parsed above depth 41, and written in new buckets).
local function split_work(d)
  return 10 + ((d >= 41 and 2 or 4) + 0.125) * (most + 1)
end

-- split splits the bucket at node (depth d) of key, which holds more than
-- most ids. hi, lo: a place in the node; resb: the shard's base mod 10^12,
-- for a node at depth 41 or below, whose members differ from hi, lo only
-- in their offset (so they need not be parsed).
local function split(d, node, key, hi, lo, resb)
  local entries = {}
  local members = redis.call('SMEMBERS', key)
  -- each parsed (above the shard, from all its digits), sorted, written again
  work = work + 2 + (d >= 41 and 2 or 4) * #members
  for j, m in ipairs(members) do
    if d >= 41 then
      entries[j] = {m, hi, lo - lo % SHARD + (act_res(m) - resb) % 1e12}
    else
      local mh, ml = act_bits(m)
      entries[j] = {m, mh, ml}
    end
  end
  redis.call('DEL', key)
  buckets(-1)
  place(d, node, entries)
end

-- clear deletes every bucket under the shard at node (depth 41) and the
-- split nodes below it, and returns the members read when collect (the
-- shard's ids, for its bitmap), else nothing.
local function clear(node41, hi, lo, resb, collect)
  local offsets, stack = {}, {{41, math.floor(lo / SHARD)}}
  while #stack > 0 do
    local top = table.remove(stack)
    local d, p = top[1], top[2] -- p: lo's top d - 32 bits
    local node = d .. '.' .. act_int(hi) .. '.' .. act_int(p)
    local v = redis.call('HGET', dir, node)
    work = work + 2
    if d > 41 and v then
      redis.call('HDEL', dir, node)
    end
    if v then -- split ('s', 's0', 's1')
      stack[#stack + 1] = {d + 1, p * 2}
      stack[#stack + 1] = {d + 1, p * 2 + 1}
    else
      local key = prefix .. node .. sfx
      if collect then
        local members = redis.call('SMEMBERS', key)
        work = work + 1 + 2 * #members
        for _, m in ipairs(members) do
          offsets[#offsets + 1] = (act_res(m) - resb) % 1e12
        end
      end
      buckets(-redis.call('DEL', key))
    end
  end
  return offsets
end

-- dense marks the shard dense in the directory, its bitmap whole: a
-- directory left with no bucket is made compact.
local function dense(shard)
  work = work + 5
  redis.call('HSET', dir, shard, 'd')
  redis.call('HDEL', dir, 'c' .. shard, 'v' .. shard)
  local all = redis.call('HGET', dir, 'D')
  all = all and all .. ' ' .. shard or shard
  redis.call('HSET', dir, 'D', all)
  if counted and redis.call('HGET', dir, 'b') == '0' then -- dense shards alone
    act_compact(dir)
    compact = all
  end
end

-- densify makes the shard at node (depth 41), a bucket, a bitmap of its
-- ids at once (a bucket holds at most most + 1 of them).
local function densify(shard, hi, lo, resb)
  local offsets = clear(shard, hi, lo, resb, true)
  local key = prefix .. shard .. sfx
  redis.call('SETBIT', key, 8388095, 0) -- made whole at once, as v3's shards
  for _, o in ipairs(offsets) do
    redis.call('SETBIT', key, o, 1)
  end
  work = work + 2 + #offsets
  made(key)
  dense(shard)
end

-- A shard split below depth 41 that reaches the dense size is built: its
-- bitmap (the key of its node at depth 41, no bucket's) is made in its
-- full room (begin), and the directory's 'v<node>' keeps a cursor, the
-- offset below which every id of the shard's buckets is in the bitmap
-- too. A step copies the buckets from the cursor on, whole, until the
-- script's budget of ids is spent; an id marked below the cursor is set in
-- the bitmap as well as added to its bucket. The buckets are what counts
-- and IsActive read until the last step, which makes the bitmap whole,
-- deletes them and says 'd'.

-- building is a shard's cursor (nil: not known yet in this script, false:
-- not being built), by node.
local building = {}

local function cursor(shard)
  if building[shard] == nil then
    building[shard] = tonumber(redis.call('HGET', dir, 'v' .. shard) or false) or false
  end
  return building[shard]
end

-- roomy gives the bitmap key of a shard being built room for the whole
-- shard, once a script, before the script first writes into it: a bitmap
-- the server loaded again (a restart's, a replica's, a RESTORE's) comes
-- back at its written length, and grown past that it would take a 2 MiB
-- class. Such a bitmap is made whole at once, its bytes as they were and
-- zeros after them (about 1,540 units: half a MiB read, a MiB written).
-- Where MEMORY USAGE is refused (miniredis), nothing is done.
local roomed = {}
local function roomy(shard, key)
  if roomed[shard] then return end
  roomed[shard] = true
  local usage = redis.pcall('MEMORY', 'USAGE', key, 'SAMPLES', '0')
  work = work + 1
  if type(usage) == 'number' and usage < 1048512 then
    local v = redis.call('GET', key)
    redis.call('SET', key, v .. string.rep('\0', 1048512 - #v), 'KEEPTTL')
    work = work + 1536
  end
end

-- begin makes the shard's bitmap in jemalloc's 1 MiB class, v3's size,
-- while it writes only half of its bytes: a string Redis grows below 1 MiB
-- gets room for twice its new length, so one byte grown to 524,256 (bit
-- 4,194,040 is in its last byte) gets 1,048,512 bytes, the whole shard.
-- Writing the whole MiB in one script (fresh pages zeroed) took up to 5 ms;
-- the other half is written by the marks and steps that reach it, and the
-- rest by the last step (whole). A string made at 524,256 bytes rather
-- than grown to it, or grown past 524,283, ends in a larger class (2 MiB).
local function begin(shard)
  local key = prefix .. shard .. sfx
  redis.call('SETBIT', key, 7, 0)
  redis.call('SETBIT', key, 4194040, 0)
  made(key)
  redis.call('HSET', dir, 'v' .. shard, 0)
  work = work + 3 + 512 -- a KiB written a unit
  building[shard] = 0
  roomed[shard] = true
end

-- step copies buckets of the shard being built, from its cursor on, while
-- the budget lasts and each leaf's work fits in what is left of the
-- script's (the first leaf of a script that marks no id is copied
-- whatever it costs: steps go on); it reports whether the shard is dense
-- now. hi, lo: a place in the shard; resb: the shard's base mod 10^12;
-- alone: the script marks no id.
local function step(shard, hi, lo, resb, alone)
  local x, base, key = building[shard], lo - lo % SHARD, prefix .. shard .. sfx
  local first = alone
  roomy(shard, key)
  while x < 8388096 and budget > 0 and work < most_work do
    local d, node = act_leaf(dir, hi, base + x)
    local leaf = prefix .. node .. sfx
    local n = redis.call('SCARD', leaf)
    work = work + 9 -- the look-up's HGETs (at most 7) and SCARD
    if work + 3 * n > most_work and not first then
      break
    end
    first = false
    local members = redis.call('SMEMBERS', leaf)
    for _, m in ipairs(members) do
      redis.call('SETBIT', key, (act_res(m) - resb) % 1e12, 1)
    end
    budget = budget - #members - 1 -- the leaf's look-up counts as an id
    work = work + 3 * #members -- SMEMBERS and a SETBIT a member
    local span = 2 ^ (64 - d)
    x = base + x - (base + x) % span + span - base -- the end of the leaf's range
  end
  -- whole: what the marks and the copies did not reach is written now,
  -- within the room begin made (the string does not move)
  local rest = x < 8388096 and 0 or 3 + (1048512 - redis.call('STRLEN', key)) / 1024
  if x < 8388096 or work + rest > most_work and not first then -- the switch waits for a step
    building[shard] = x
    redis.call('HSET', dir, 'v' .. shard, x)
    return false
  end
  work = work + rest
  redis.call('SETBIT', key, 8388095, redis.call('GETBIT', key, 8388095)) -- the last bit may be an id's
  clear(shard, hi, lo, resb, false)
  building[shard] = false
  dense(shard)
  return true
end

-- leafAt is the leaf at depth d on h's path, with what a mark needs of it,
-- built once: its name, directory value and key, its shard's node (depth
-- 41 and below), its prefix as numbers (a, b), for holds, and its size
-- once read (n).
local function leafAt(d, node, v, hi, lo)
  local l = {d = d, node = node, v = v, key = prefix .. node .. sfx, shard = d >= 41 and act_node(41, hi, lo)}
  if d <= 32 then
    l.a = math.floor(hi / 2 ^ (32 - d))
  else
    l.a, l.b = hi, math.floor(lo / 2 ^ (64 - d))
  end
  return l
end

-- holds says whether the leaf l is on h's path: no string is built.
local function holds(l, hi, lo)
  if l.d <= 32 then
    return math.floor(hi / 2 ^ (32 - l.d)) == l.a
  end
  return hi == l.a and math.floor(lo / 2 ^ (64 - l.d)) == l.b
end

-- A batch comes sorted by h: the leaf of the id before is tried first.
local reply, seen, last = {tonumber(deadline)}, {}, nil
local built = {} -- shards being built that this script touched: {shard, hi, lo, resb, i}
local taken, marked = 0, 0 -- marked: ids, not steps
for i = 6, #ARGV, 3 do
  if work >= most_work and taken > 0 then
    break -- the caller sends the rest again
  end
  local hi, lo, m = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), ARGV[i + 2]
  local pos = (i - 3) / 3
  taken = pos
  work = work + 2 -- the id's own command and what it reads of the directory
  if string.sub(m, 1, 1) == '~' then -- a step of a shard's building, no id
    local shard = act_node(41, hi, lo)
    if cursor(shard) and not seen[shard] then
      seen[shard] = true
      built[#built + 1] = {shard, hi, lo, act_res(string.sub(m, 2)), pos}
    elseif redis.call('HGET', dir, shard) == 'd' and not seen[shard] then
      seen[shard] = true
      reply[#reply + 1] = pos
    end
  else
    marked = marked + 1
    local l
    if compact and act_dense(compact, act_node(41, hi, lo)) then
      l = leafAt(41, act_node(41, hi, lo), 'd', hi, lo)
    else
      if compact then -- a bucket joins: the trie is made whole first
        act_unpack(dir, compact)
        compact, last = false, nil
      end
      if last and holds(last, hi, lo) then
        l = last
      else
        local d, node, v = act_leaf(dir, hi, lo)
        l = leafAt(d, node, v, hi, lo)
        work = work + 8 -- the look-up's HGETs (at most 7) and the names it builds
      end
    end
    last = l
    local d, shard = l.d, l.shard
    if l.v ~= 'd' and not l.n then
      l.n = redis.call('SCARD', l.key)
      work = work + 1
    end
    if l.v ~= 'd' and l.n >= most and pos > 1 and work + split_work(d) > most_work then
      taken = pos - 1 -- a split that may not fit: the caller sends this id again
      break
    end
    if l.v == 'd' then
      redis.call('SETBIT', l.key, lo % SHARD, 1)
    elseif redis.call('SADD', l.key, m) == 1 then
      local n = l.n + 1
      l.n = n
      if n == 1 then
        work = work + 4
        made(l.key)
        buckets(1)
        local parent = d > 4 and act_node(d - 1, hi, lo)
        local pv = parent and redis.call('HGET', dir, parent)
        if pv == 's0' or pv == 's1' then -- both halves hold ids now
          redis.call('HSET', dir, parent, 's')
        end
      end
      local c
      local resb = (act_res(m) - lo % SHARD) % 1e12
      if d > 41 then
        work = work + 2
        c = redis.call('HINCRBY', dir, 'c' .. shard, 1)
        local x = cursor(shard)
        if x and lo % SHARD < x then
          roomy(shard, prefix .. shard .. sfx)
          redis.call('SETBIT', prefix .. shard .. sfx, lo % SHARD, 1)
        end
        if not x and c >= dense_at then
          begin(shard)
        end
        if building[shard] and not seen[shard] then
          seen[shard] = true
          built[#built + 1] = {shard, hi, lo, resb, pos}
        end
      elseif d == 41 and n > most then
        c = n
      end
      if d == 41 and c and c >= dense_at then
        densify(shard, hi, lo, resb)
        l.v, last = 'd', nil
      elseif n > most then
        split(d, l.node, l.key, hi, lo, resb)
        last = nil
      end
    end
    if l.v == 'd' and not seen[shard] then
      seen[shard] = true
      reply[#reply + 1] = pos
    end
  end
end
-- The shards being built: a step each while the budget lasts.
local still = {}
for i, b in ipairs(built) do
  if budget > 0 and work < most_work and step(b[1], b[2], b[3], b[4], marked == 0 and i == 1) then
    reply[#reply + 1] = b[5]
  else
    still[#still + 1] = b[5]
  end
end
reply[#reply + 1] = 0
for _, j in ipairs(still) do
  reply[#reply + 1] = j
end
table.insert(reply, 2, taken)
return reply
