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
-- A semaphore whose permits store no Owner pays nothing for them: the
-- owners hash is read (HLEN) only where it may hold something, and written
-- only where st.named, its size, says it does.

-- sem_read reads every key a script may write (but the abandon mark) before
-- its first write, and returns the state: last (the counter), limit (the
-- stored limit, nil if none), admin (SetSemaphoreLimit set it), queued
-- (the queue's length), owners (the owner set's size, which sem_drop and
-- sem_purge keep up to date), named (the owners hash's size, which they
-- keep too). named: false if the caller knows the owners hash is absent
-- (it is not read); lazy: the caller writes the waiters hash only if
-- someone is queued, so it is read only then.
local function sem_read(k, named, lazy)
  local last, err = counter_read(k.counter)
  if err then return nil, err end
  local limit = redis.call('GET', k.limit)
  if limit and not string.match(limit, '^%d+$') then
    return nil, redis.error_reply('ERR atomicredis: ' .. k.limit .. ' does not hold a number')
  end
  local st = {last = last, limit = tonumber(limit), admin = false, named = 0}
  if limit then
    st.admin = redis.call('PTTL', k.limit) > 0
  end
  st.queued = redis.call('ZCARD', k.q)
  if st.queued > 0 or not lazy then
    redis.call('HLEN', k.w)
  end
  st.owners = redis.call('ZCARD', k.owner)
  if named ~= false then
    st.named = redis.call('HLEN', k.owners)
  end
  return st
end

-- sem_purge drops timed-out permits (and their Owners), then the same ids
-- from the owner set (ZINTERSTORE with weights 1, 0 keeps the owner set's
-- counters) when the two sets differ in size, and counts the live ones
-- into st.held.
local function sem_purge(k, st, now)
  if st.named > 0 then
    local gone = redis.call('ZRANGEBYSCORE', k.timeouts, '-inf', now)
    for i = 1, #gone, 1000 do -- unpack takes a bounded number of values
      st.named = st.named - redis.call('HDEL', k.owners, unpack(gone, i, math.min(i + 999, #gone)))
    end
  end
  redis.call('ZREMRANGEBYSCORE', k.timeouts, '-inf', now)
  st.held = redis.call('ZCARD', k.timeouts)
  if st.held ~= st.owners then
    redis.call('ZINTERSTORE', k.owner, 2, k.owner, k.timeouts, 'WEIGHTS', 1, 0)
    st.owners = st.held
  end
end

-- sem_admit gives free slots under limit to live waiters in queue order.
-- Each gets a permit that lasts until its queue entry's deadline (it
-- extends it when it confirms), with the Owner its entry carries, and is
-- woken, except caller, whose own script replies: sem_admit returns
-- caller's counter if caller was admitted.
local function sem_admit(k, st, limit, now, caller, retention, wake)
  local got
  while st.queued > 0 and st.held < limit do
    local head, deadline, engine, arrival, owner = q_head(k.q, k.w, now)
    if not head then break end
    q_leave(k.q, k.w, head)
    st.last = counter_next(k.counter, st.last, retention)
    redis.call('ZADD', k.timeouts, deadline, head)
    redis.call('ZADD', k.owner, fmt(st.last), head)
    if owner then
      st.named = st.named + redis.call('HSET', k.owners, head, owner)
    end
    st.held = st.held + 1
    if head == caller then
      got = st.last
    else
      q_wake(wake, engine, head, st.last, arrival)
    end
  end
  return got
end

-- sem_settle runs after permits left: the freed slots go to waiters, and a
-- limit an acquisition stored goes with the last holder (as do any Owners
-- left).
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
  end
end

-- sem_drop removes a permit (and its Owner), returning whether it was
-- live.
local function sem_drop(k, st, token, now)
  local deadline = redis.call('ZSCORE', k.timeouts, token)
  redis.call('ZREM', k.timeouts, token)
  st.owners = st.owners - redis.call('ZREM', k.owner, token)
  if st.named > 0 then
    st.named = st.named - redis.call('HDEL', k.owners, token)
  end
  return deadline and tonumber(deadline) > now
end
