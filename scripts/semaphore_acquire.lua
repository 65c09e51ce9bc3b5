-- semaphore_acquire: the book's fair semaphore (listing 6.14), whole, in one
-- script: purge timed-out permits, rank by a shared counter, admit if a
-- slot is free and no live waiter is queued ahead; otherwise, in wait mode,
-- queue (or extend the caller's entry). A waiter handed a permit picks it
-- up here if its wake-up did not reach it.
-- KEYS[1] timeouts (zset id -> deadline ms), KEYS[2] owner (zset id ->
-- counter), KEYS[3] counter, KEYS[4] the stored limit, KEYS[5] queue,
-- KEYS[6] waiters, KEYS[7] owners (hash id -> Owner), KEYS[8] this
-- token's abandon mark
-- ARGV[1] id (the permit's token), ARGV[2] mode: 0 one try, 1 wait, 2 wait and
-- the caller believes it is queued,
-- ARGV[3] queue entry lifetime in ms, ARGV[4] TTL in ms, ARGV[5] fence
-- retention in ms, ARGV[6] the caller's engine id, ARGV[7] wake channel
-- prefix, ARGV[8] limit (0: the stored one), ARGV[9] the Owner to store
-- with the permit (absent or "": none; it goes with the queue entry, so a
-- handoff stores it), ARGV[10] the permit's weight (absent: 1; it goes
-- with the queue entry too)
-- reply: {1, counter} if the caller holds a permit now, for its full TTL,
-- {1, counter, stored limit} if ARGV[8] asked another limit than the stored
-- one;
-- {0, ms until the first permit times out, rank in the queue (one try:
-- how many are queued), arrival number (0 unless it just queued), the
-- limit in force, weight held} if not; {2} if the caller abandoned this
-- token; {3} if ARGV[8] is 0 and no limit is stored (nothing written);
-- {4, the limit in force} if the weight is above it (nothing written but,
-- for a caller that believes it is queued, the removal of its entry).
--
-- The book's version needs a lock because its INCR, ZADDs and ZRANK are
-- separate round trips: two clients can both rank below the limit. Here
-- nothing runs between them. The clock is the server's, and a permit's
-- score is its deadline, so permits may have different TTLs. A stored
-- limit rules: a caller asking another one follows it.
--
-- A one try that finds no slot free comes first and alone, and writes
-- nothing: the stored limit (no weight beyond one held), the live permits
-- counted, the caller's own permit looked for (a handoff's pickup), the
-- first live deadline and the queue read; the shared Lua after it is only
-- defined when it is needed. Nobody queued can be admitted then either.
-- A one try it does not refuse goes on with what it read: the limit, the
-- clock, and the live permits, which is what the purge leaves.
local now, now_micros, raw, live
if ARGV[2] == '0' then
  raw = redis.call('GET', KEYS[4])
  local limit = raw and string.match(raw, '^%d+$') and tonumber(raw)
  if limit and limit >= 1 and (tonumber(ARGV[10]) or 1) <= limit then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local after = '(' .. string.format('%.0f', now)
    live = redis.call('ZCOUNT', KEYS[1], after, '+inf')
    if live >= limit and not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
      local first = redis.call('ZRANGEBYSCORE', KEYS[1], after, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2]
      return {0, tonumber(first) - now, redis.call('ZCARD', KEYS[5]), 0, limit, live}
    end
  end
end
-- (libraries)
local k = {timeouts = KEYS[1], owner = KEYS[2], counter = KEYS[3], limit = KEYS[4], q = KEYS[5], w = KEYS[6],
  owners = KEYS[7]}
if not now then now, now_micros = now_ms() end
local token, ttl, owner, weight = ARGV[1], tonumber(ARGV[4]), ARGV[9], tonumber(ARGV[10]) or 1
if owner == '' then owner = nil end
local mine = redis.call('ZSCORE', k.timeouts, token)
if mine and tonumber(mine) > now then -- handed over while queued: pick it up
  local rank = redis.call('ZSCORE', k.owner, token)
  redis.call('ZADD', k.timeouts, now + ttl, token)
  return {1, tonumber(rank)}
end
-- One EXISTS asks after the abandon mark and the owners hash at once: a
-- semaphore whose permits store no Owner pays nothing more for them.
local found = redis.call('EXISTS', KEYS[8], k.owners)
if found > 0 and redis.call('EXISTS', KEYS[8]) == 1 then
  return {2}
end
local st, err = sem_read(k, found > 0 or owner ~= nil, ARGV[2] == '0' and 'waiters' or nil, raw) -- one try queues nobody
if err then return err end
st.live = live
local limit = st.limit or tonumber(ARGV[8])
if limit == 0 then
  return {3}
end
if weight > limit then
  if ARGV[2] == '2' then
    q_leave(k.q, k.w, token)
  end
  return {4, limit}
end

sem_purge(k, st, now)
local c, blocked = sem_admit(k, st, limit, now, token, ARGV[5], ARGV[7]) -- waiters first, in order
if not c and not blocked and st.held + weight <= limit then -- room, and no live waiter ahead
  st.last = counter_next(k.counter, st.last, ARGV[5])
  c = st.last
  redis.call('ZADD', k.owner, fmt(c), token)
  if weight > 1 then
    st.named = st.named + redis.call('HSET', k.owners, 'w:' .. token, weight)
    st.extra = st.extra + weight - 1
  end
  st.held = st.held + weight
end
if (st.limit and st.extra ~= st.extra0) or (st.held > 0 and not st.limit) then -- the limit (with the extra weight) to store
  local v = st.extra > 0 and fmt(limit) .. ' ' .. fmt(st.extra) or fmt(limit)
  local keep = st.admin and (c and ARGV[5] or st.ttl)
  if keep then
    redis.call('SET', k.limit, v, 'PX', keep)
  else
    redis.call('SET', k.limit, v)
  end
elseif c and st.admin then
  redis.call('PEXPIRE', k.limit, ARGV[5])
end
if c then
  redis.call('ZADD', k.timeouts, now + ttl, token)
  if owner then
    redis.call('HSET', k.owners, token, owner)
  end
  if st.limit and ARGV[8] ~= '0' and st.limit ~= tonumber(ARGV[8]) then
    return {1, c, st.limit}
  end
  return {1, c}
end

local first = redis.call('ZRANGE', k.timeouts, 0, 0, 'WITHSCORES')[2]
local hint = -1
if first then
  hint = tonumber(first) - now
end
if ARGV[2] == '0' then
  return {0, hint, st.queued, 0, limit, st.held}
end
local rank, arrival = q_join(k.q, k.w, token, now, now_micros, tonumber(ARGV[3]), ARGV[6], st.queued, ARGV[2] == '2', owner, weight)
return {0, hint, rank, arrival, limit, st.held}
