-- rw: the holds of a read-write lock and their admission (shared by the
-- rw scripts; needs lib/queue.lua). k names the keys: leases (zset token
-- -> lease deadline, server ms), holds (hash: token -> the sequence number
-- of the hold's last extension, written by rw_extend; "f:" .. token -> the
-- fence a hold was handed over with, for its waiter to pick up; "o:" ..
-- token -> the Owner stored with the hold, only if it has one), fence
-- (the counter), q, w (the queue); and the state a script carries: last
-- (the counter as read), retention (ms), wake (the wake channel prefix).
-- A token starts with its mode, "r-" a reader, "w-" a writer, so a queue
-- entry carries its waiter's. Readers hold together; a writer holds alone.
--
-- On the common paths (taking a free lock, releasing with nobody queued)
-- keys a path does not write are not read for their type, emptiness is
-- asked with ZCARD, and the holds hash is written only by handoffs,
-- extensions and holds with an Owner. Every path that removes a hold
-- deletes its three fields in the same HDEL.

-- rw_fence_ok reads the fence counter into k.last: an error reply if it
-- holds text.
local function rw_fence_ok(k)
  local last, err = counter_read(k.fence)
  k.last = last
  return err
end

-- rw_fence hands out the next fence.
local function rw_fence(k)
  k.last = counter_next(k.fence, k.last, k.retention)
  return k.last
end

-- rw_check reads every key before a script's first write (a key of the
-- wrong type fails the script with nothing changed).
local function rw_check(k)
  local err = rw_fence_ok(k)
  if err then return err end
  redis.call('ZCARD', k.leases)
  redis.call('HLEN', k.holds)
  redis.call('HLEN', k.w)
  redis.call('ZCARD', k.q)
end

local function rw_writer(token)
  return string.sub(token, 1, 2) == 'w-'
end

local function rw_drop(k, token)
  redis.call('ZREM', k.leases, token)
  redis.call('HDEL', k.holds, token, 'f:' .. token, 'o:' .. token)
end

-- rw_first returns the first hold (the one whose lease ends first) and
-- whether its lease has run out; nil if nobody holds. (ZCARD first: on an
-- empty set it is much cheaper than ZRANGE.)
local function rw_first(k, now)
  if redis.call('ZCARD', k.leases) == 0 then return nil, false end
  local first = redis.call('ZRANGE', k.leases, 0, 0, 'WITHSCORES')
  return first[1], tonumber(first[2]) <= now
end

-- rw_purge drops the holds whose lease has run out.
local function rw_purge(k, now)
  for _, token in ipairs(redis.call('ZRANGEBYSCORE', k.leases, '-inf', now)) do
    rw_drop(k, token)
  end
end

-- rw_blocked reports whether holder (the first live hold, or nil) keeps
-- token out: any hold keeps a writer out, a writer's keeps a reader out
-- (a writer holds alone, so the first hold tells).
local function rw_blocked(token, holder)
  return holder ~= nil and (rw_writer(token) or rw_writer(holder))
end

local function rw_holder(k)
  return redis.call('ZRANGE', k.leases, 0, 0)[1]
end

-- rw_admit hands the lock to the head of the queue as far as the holds
-- allow: a writer once nobody holds, or the whole run of readers at the
-- head while no writer holds (stopping at the first writer, so readers
-- that came after a writer wait for it). Each hold lasts until its
-- waiter's queue entry deadline (the waiter extends it when it picks it
-- up), and its waiter is woken, except caller, whose own script replies;
-- the Owner its queue entry carries is stored with it. Expired holds must
-- have been purged. Returns caller's fence if caller was admitted, whether
-- the holds hash was written (others were admitted, or an Owner stored),
-- and whether a live waiter is still queued.
local function rw_admit(k, now, caller)
  local got, wrote = nil, false
  while true do
    local head, deadline, engine, arrival, owner = q_head(k.q, k.w, now)
    if not head then return got, wrote, false end
    if rw_blocked(head, rw_holder(k)) then return got, wrote, true end
    q_leave(k.q, k.w, head)
    local f = rw_fence(k)
    redis.call('ZADD', k.leases, deadline, head)
    if head == caller then
      got = f
      if owner then
        redis.call('HSET', k.holds, 'o:' .. head, owner)
        wrote = true
      end
    else
      if owner then
        redis.call('HSET', k.holds, 'f:' .. head, fmt(f), 'o:' .. head, owner)
      else
        redis.call('HSET', k.holds, 'f:' .. head, fmt(f))
      end
      q_wake(k.wake, engine, head, f, arrival)
      wrote = true
    end
  end
end

-- rw_last is the latest lease deadline, nil if nobody holds.
local function rw_last(k)
  local last = redis.call('ZRANGE', k.leases, -1, -1, 'WITHSCORES')[2]
  return last and tonumber(last)
end

-- rw_expire makes the leases (and, if it was written, the holds hash) live
-- exactly as long as the longest lease, so a lock whose holders all
-- vanished leaves nothing behind but its fence. (No path shortens a lease
-- of a hold the hash has fields for without this, so the hash outlives
-- them.)
local function rw_expire(k, now, hash)
  local last = rw_last(k)
  if not last then return end
  local ms = math.max(last - now, 1)
  redis.call('PEXPIRE', k.leases, ms)
  if hash then
    redis.call('PEXPIRE', k.holds, ms)
  end
end

-- rw_settle runs after holds or waiters left: the lock goes to the waiters
-- it can go to now.
local function rw_settle(k, now)
  rw_purge(k, now)
  local _, wrote = rw_admit(k, now, nil)
  rw_expire(k, now, wrote)
end

