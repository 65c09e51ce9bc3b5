-- semaphore: the permits of a counting semaphore, purged and handed to
-- waiters (shared by the semaphore scripts; needs lib/queue.lua). k names
-- the keys: timeouts (zset token -> deadline, server ms), owner (zset
-- token -> counter), counter, limit, q, w (the queue), owners (hash token
-- -> the Owner stored with the permit: a field only for a permit that has
-- one, removed with the permit). The stored limit has no TTL when an
-- acquisition set it (it goes with the last permit), and the fence
-- retention when SetSemaphoreLimit set it (it stays while the semaphore
-- is idle).
--
-- Weights: a permit of weight w above 1 takes w of the limit. Its weight
-- is a field of the owners hash, 'w:'token -> w, removed with the permit,
-- and the stored limit carries, after a space, the weight such permits
-- take beyond one each ("10 4": limit 10, two permits of weight 3 among
-- those held), so that the weight held is the number of permits plus that
-- extra, read with the limit. A waiter's weight rides in its queue entry
-- (lib/queue.lua). A weight above the limit in force is refused: at once
-- to a caller, and by a wake-up (fence 0: look again) to a waiter that
-- reaches the head, or that SetSemaphoreLimit finds too heavy.
--
-- A semaphore whose permits store no Owner and weigh 1 pays nothing for
-- either: the owners hash is read (HLEN) only where it may hold something,
-- and written only where st.named, its size, says it does; weights are
-- read only where st.extra says some are held. (Weights are handled
-- inline, not in functions of their own: every local function is a
-- closure made on every run of every script that carries it, which
-- measurably slowed the weight-1 path.)

-- sem_read reads every key a script may write (but the abandon mark) before
-- its first write, and returns the state: last (the counter), limit (the
-- stored limit, nil if none), admin (SetSemaphoreLimit set it), ttl (the
-- stored limit's PTTL), extra (the weight weighted permits take beyond one
-- each, which sem_drop, sem_purge and sem_admit keep up to date, and
-- sem_settle stores), queued (the queue's length), owners (the owner set's
-- size, which sem_drop and sem_purge keep up to date), named (the owners
-- hash's size, which they keep too). named: false if the caller knows the
-- owners hash is absent (it is not read); lazy: what the caller writes
-- only if someone is queued, so it is read only then: 'waiters' (a one-try
-- acquire hands permits to waiters, but queues nobody), 'waiters+counter'
-- (a release takes no permit: it numbers one only for a waiter). read: the
-- stored limit if the caller has read it (false: absent), nil if not.
local function sem_read(k, named, lazy, read)
  local raw = read
  if raw == nil then
    raw = redis.call('GET', k.limit)
  end
  local limit, extra, ttl
  if raw then
    limit = string.match(raw, '^%d+$') -- the limit alone; with weights held, "limit extra"
    if not limit then
      limit, extra = string.match(raw, '^(%d+) (%d+)$')
    end
    if not limit then
      return nil, redis.error_reply('ERR atomicredis: ' .. k.limit .. ' does not hold a number')
    end
    ttl = redis.call('PTTL', k.limit)
  end
  extra = extra and tonumber(extra) or 0
  local queued = redis.call('ZCARD', k.q)
  local last
  if queued > 0 or lazy ~= 'waiters+counter' then
    local err
    last, err = counter_read(k.counter)
    if err then return nil, err end
  end
  if queued > 0 or not lazy then
    redis.call('HLEN', k.w)
  end
  local owners, size = redis.call('ZCARD', k.owner), 0
  if named ~= false then
    size = redis.call('HLEN', k.owners)
    if not raw and size > 0 then -- the limit went while permits were held: count their weights again
      local all = redis.call('HGETALL', k.owners)
      for i = 1, #all, 2 do
        if string.sub(all[i], 1, 2) == 'w:' then
          extra = extra + tonumber(all[i + 1]) - 1
        end
      end
    end
  end
  -- one table with every field, made at once
  return {last = last, limit = limit and tonumber(limit), admin = raw and ttl > 0, ttl = ttl, queued = queued,
    owners = owners, named = size, extra = extra, extra0 = extra, held = 0}
end

-- sem_purge drops timed-out permits (and their Owners and weights), then
-- the same ids from the owner set (ZINTERSTORE with weights 1, 0 keeps the
-- owner set's counters) when the two sets differ in size, and counts the
-- weight the live ones hold into st.held. st.live, if the caller counted
-- the live permits at now, is what is left.
local function sem_purge(k, st, now)
  if st.named > 0 then
    local gone = redis.call('ZRANGEBYSCORE', k.timeouts, '-inf', now)
    for i = 1, #gone, 1000 do -- unpack takes a bounded number of values
      st.named = st.named - redis.call('HDEL', k.owners, unpack(gone, i, math.min(i + 999, #gone)))
    end
    if st.extra > 0 then -- and their weights
      for _, id in ipairs(gone) do
        local w = redis.call('HGET', k.owners, 'w:' .. id)
        if w then
          st.named = st.named - redis.call('HDEL', k.owners, 'w:' .. id)
          st.extra = st.extra - (tonumber(w) - 1)
        end
      end
    end
  end
  redis.call('ZREMRANGEBYSCORE', k.timeouts, '-inf', now)
  local n = st.live or redis.call('ZCARD', k.timeouts)
  if n ~= st.owners then
    redis.call('ZINTERSTORE', k.owner, 2, k.owner, k.timeouts, 'WEIGHTS', 1, 0)
    st.owners = n
  end
  st.held = n + st.extra
end

-- sem_admit gives free slots under limit to live waiters in queue order,
-- strictly: a head whose weight does not fit in what is free waits, and
-- so does everyone behind it. Each gets a permit that lasts until its
-- queue entry's deadline (it extends it when it confirms), with the Owner
-- and weight its entry carries, and is woken, except caller, whose own
-- script replies. A head heavier than limit leaves the queue, woken to
-- look again (its acquire script refuses it). sem_admit returns caller's
-- counter if caller was admitted, and whether a live waiter was left at
-- the head (blocked): then nobody else may be admitted.
local function sem_admit(k, st, limit, now, caller, retention, wake)
  local got
  while st.queued > 0 and st.held < limit do
    local head, deadline, engine, arrival, owner, weight = q_head(k.q, k.w, now)
    if not head then break end
    if weight > limit then
      q_leave(k.q, k.w, head)
      q_wake(wake, engine, head, 0, arrival)
    elseif st.held + weight > limit then
      return got, true
    else
      q_leave(k.q, k.w, head)
      st.last = counter_next(k.counter, st.last, retention)
      redis.call('ZADD', k.timeouts, deadline, head)
      redis.call('ZADD', k.owner, fmt(st.last), head)
      if owner then
        st.named = st.named + redis.call('HSET', k.owners, head, owner)
      end
      if weight > 1 then
        st.named = st.named + redis.call('HSET', k.owners, 'w:' .. head, weight)
        st.extra = st.extra + weight - 1
      end
      st.held = st.held + weight
      if head == caller then
        got = st.last
      else
        q_wake(wake, engine, head, st.last, arrival)
      end
    end
  end
  return got, false
end

-- sem_settle runs after permits left: the freed slots go to waiters, and a
-- limit an acquisition stored goes with the last holder (as do any Owners
-- left); else the stored limit keeps the extra weight, and its expiry.
local function sem_settle(k, st, now, retention, wake)
  if st.limit then
    sem_admit(k, st, st.limit, now, nil, retention, wake)
  end
  if st.held == 0 and st.named > 0 then
    redis.call('DEL', k.owners)
    st.named = 0
  end
  if st.limit and st.held == 0 and not st.admin then
    redis.call('DEL', k.limit)
  elseif st.limit and st.extra ~= st.extra0 then -- the limit keeps the extra weight
    local v = st.extra > 0 and fmt(st.limit) .. ' ' .. fmt(st.extra) or fmt(st.limit)
    if st.admin then
      redis.call('SET', k.limit, v, 'PX', st.ttl)
    else
      redis.call('SET', k.limit, v)
    end
  end
end

-- sem_drop removes a permit (and its Owner and weight), returning whether
-- it was live.
local function sem_drop(k, st, token, now)
  local deadline = redis.call('ZSCORE', k.timeouts, token)
  redis.call('ZREM', k.timeouts, token)
  st.owners = st.owners - redis.call('ZREM', k.owner, token)
  if st.named > 0 then
    st.named = st.named - redis.call('HDEL', k.owners, token)
    local w = st.extra > 0 and redis.call('HGET', k.owners, 'w:' .. token)
    if w then
      st.named = st.named - redis.call('HDEL', k.owners, 'w:' .. token)
      st.extra = st.extra - (tonumber(w) - 1)
    end
  end
  return deadline and tonumber(deadline) > now
end
