-- semaphore: purging timed-out permits and handing free slots to waiters
-- (shared by the semaphore scripts; needs lib/queue.lua). k names the
-- keys: timeouts (token -> deadline), owner (token -> counter), counter,
-- limit, q, w (the queue).

-- sem_purge drops timed-out permits, then the same ids from the owner set
-- (ZINTERSTORE with weights 1, 0 keeps the owner set's counters).
local function sem_purge(k, now)
  redis.call('ZREMRANGEBYSCORE', k.timeouts, '-inf', now)
  if redis.call('ZCARD', k.timeouts) ~= redis.call('ZCARD', k.owner) then
    redis.call('ZINTERSTORE', k.owner, 2, k.owner, k.timeouts, 'WEIGHTS', 1, 0)
  end
end

-- sem_admit gives free slots to live waiters in queue order. Each gets a
-- permit that lasts until its queue entry's deadline (it extends it when
-- it picks the permit up) and is woken, except caller, whose own script
-- replies: sem_admit returns caller's counter if caller was admitted.
local function sem_admit(k, limit, now, caller)
  local got
  while redis.call('ZCARD', k.owner) < limit do
    local head, deadline, inbox = q_head(k.q, k.w, now)
    if not head then break end
    q_leave(k.q, k.w, head)
    local c = redis.call('INCR', k.counter)
    redis.call('ZADD', k.timeouts, deadline, head)
    redis.call('ZADD', k.owner, c, head)
    if head == caller then
      got = c
    else
      q_wake(inbox, head, c, deadline, now)
    end
  end
  return got
end

-- sem_settle runs after permits left: the freed slots go to waiters, and
-- the stored limit goes with the last holder.
local function sem_settle(k, now)
  local limit = redis.call('GET', k.limit)
  if limit then
    sem_admit(k, tonumber(limit), now, nil)
  end
  if redis.call('ZCARD', k.timeouts) == 0 then
    redis.call('DEL', k.limit)
  end
end

-- sem_check reads every key before the first write (a key of the wrong
-- type fails the script with nothing changed) and returns the stored limit.
local function sem_check(k)
  local counter = redis.call('GET', k.counter)
  if counter and not string.match(counter, '^%d+$') then
    return nil, redis.error_reply('ERR atomicredis: semaphore counter key does not hold a counter')
  end
  local limit = redis.call('GET', k.limit)
  if limit and not string.match(limit, '^%d+$') then
    return nil, redis.error_reply('ERR atomicredis: semaphore limit key does not hold a number')
  end
  redis.call('ZCARD', k.timeouts)
  redis.call('ZCARD', k.owner)
  q_check(k.q, k.w)
  return limit
end

