-- semaphore: the permits of a counting semaphore, purged and handed to
-- waiters (shared by the semaphore scripts; needs lib/queue.lua). k names
-- the keys: timeouts (zset token -> deadline, server ms), owner (zset
-- token -> counter), counter, limit, q, w (the queue). The stored limit
-- has no TTL when an acquisition set it (it goes with the last permit),
-- and the fence retention when SetSemaphoreLimit set it (it stays while
-- the semaphore is idle).

-- sem_read reads every key a script may write (but the abandon mark) before
-- its first write, and returns the state: last (the counter), limit (the
-- stored limit, nil if none), admin (SetSemaphoreLimit set it), queued
-- (the queue's length), owners (the owner set's size, which sem_drop and
-- sem_purge keep up to date).
local function sem_read(k)
  local last, err = counter_read(k.counter)
  if err then return nil, err end
  local limit = redis.call('GET', k.limit)
  if limit and not string.match(limit, '^%d+$') then
    return nil, redis.error_reply('ERR atomicredis: ' .. k.limit .. ' does not hold a number')
  end
  local st = {last = last, limit = tonumber(limit), admin = false}
  if limit then
    st.admin = redis.call('PTTL', k.limit) > 0
  end
  st.queued = redis.call('ZCARD', k.q)
  redis.call('HLEN', k.w)
  st.owners = redis.call('ZCARD', k.owner)
  return st
end

-- sem_purge drops timed-out permits, then the same ids from the owner set
-- (ZINTERSTORE with weights 1, 0 keeps the owner set's counters) when
-- the two sets differ in size, and counts the live ones into st.held.
local function sem_purge(k, st, now)
  redis.call('ZREMRANGEBYSCORE', k.timeouts, '-inf', now)
  st.held = redis.call('ZCARD', k.timeouts)
  if st.held ~= st.owners then
    redis.call('ZINTERSTORE', k.owner, 2, k.owner, k.timeouts, 'WEIGHTS', 1, 0)
    st.owners = st.held
  end
end

-- sem_admit gives free slots under limit to live waiters in queue order.
-- Each gets a permit that lasts until its queue entry's deadline (it
-- extends it when it confirms) and is woken, except caller, whose own
-- script replies: sem_admit returns caller's counter if caller was
-- admitted.
local function sem_admit(k, st, limit, now, caller, retention, wake)
  local got
  while st.queued > 0 and st.held < limit do
    local head, deadline, engine, arrival = q_head(k.q, k.w, now)
    if not head then break end
    q_leave(k.q, k.w, head)
    st.last = counter_next(k.counter, st.last, retention)
    redis.call('ZADD', k.timeouts, deadline, head)
    redis.call('ZADD', k.owner, fmt(st.last), head)
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
-- limit an acquisition stored goes with the last holder.
local function sem_settle(k, st, now, retention, wake)
  if not st.limit then return end
  sem_admit(k, st, st.limit, now, nil, retention, wake)
  if st.held == 0 and not st.admin then
    redis.call('DEL', k.limit)
  end
end

-- sem_drop removes a permit, returning whether it was live.
local function sem_drop(k, st, token, now)
  local deadline = redis.call('ZSCORE', k.timeouts, token)
  redis.call('ZREM', k.timeouts, token)
  st.owners = st.owners - redis.call('ZREM', k.owner, token)
  return deadline and tonumber(deadline) > now
end
