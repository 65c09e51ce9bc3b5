-- lock: the keys of a lock and its handoff (shared by the lock scripts;
-- needs lib/queue.lua). k names the keys: lock (a string "token fence
-- seq" or "token fence seq owner": the holder, its fence, its last
-- extension's number and the Owner stored with it, any bytes; it lives as
-- long as the lease), fence (the counter), q, w (the queue).
--
-- The lock's value is built (lock_value; lock_reowned for another Owner)
-- and parsed (lock_parse; lock_fields for lock_info) here, and its
-- pattern is written here alone. The common paths that cannot afford a
-- function (each a script defines costs its share: lock_extend through
-- these two took 19% more of the server's instructions) build or read it
-- inline, without a pattern: lock_acquire's grant, lock_extend's and
-- lock_extend_many's extensions (the token and the spaces found with
-- string.find), and the check that the value opens with the caller's
-- token and a space (lock_release, lock_pttl,
-- scripts/wrap/guarded_lock.lua); TestLock_ValueRoundTrip holds each to
-- these two.

-- lock_parse returns the holder, fence, extension number and owner (nil
-- if none) of a lock's value v (as GET read it), nil if v is (the lock is
-- free).
local function lock_parse(v)
  if not v then return nil end
  local token, fence, seq, owner = string.match(v, '^(%S+) (%d+) (%d+) ?(.*)$')
  if owner == '' then owner = nil end
  return token, tonumber(fence), tonumber(seq), owner
end

-- lock_value is the lock's value for holder token with fence f (a number),
-- extension number seq (a string) and owner (nil: none).
local function lock_value(token, f, seq, owner)
  local v = token .. ' ' .. fmt(f) .. ' ' .. seq
  if owner then v = v .. ' ' .. owner end
  return v
end

-- lock_reowned is the lock's value v (as GET read it, a lock's) with
-- owner (nil: none) in place of its Owner, every other field as it was.
local function lock_reowned(v, owner)
  local head = string.match(v, '^%S+ %d+ %d+')
  if owner then return head .. ' ' .. owner end
  return head
end

-- lock_fields returns the fields of a lock's value v (as GET read it) as
-- lock_info replies with them, names and values in turn: {'token', holder,
-- 'fence', fence, 'owner', owner ('' if none)}, {} if v is nil or no
-- lock's value (the lock is free). A field the value gains is added here
-- and in LockInfo's decoder (lock.go), nowhere else.
local function lock_fields(v)
  local token, fence, _, owner = lock_parse(v)
  if not token then return {} end
  return {'token', token, 'fence', fmt(fence), 'owner', owner or ''}
end

-- lock_read returns the lock's holder, fence, extension number and owner,
-- nil if it is free.
local function lock_read(lock)
  return lock_parse(redis.call('GET', lock))
end

-- lock_grant makes token the holder with fence f and owner (nil: none) for
-- ms milliseconds.
local function lock_grant(k, token, f, ms, owner)
  redis.call('SET', k.lock, lock_value(token, f, '0', owner), 'PX', ms)
end

-- lock_handoff gives the lock, which the caller has just freed, to the
-- first live waiter and wakes it; last is the fence counter as read. The
-- waiter's lease runs only to its queue entry's deadline: if it died since
-- its last extension, the others lose at most that; a living waiter extends
-- it to its own lease (its confirmation). Returns false if no live waiter
-- was queued (the caller then deletes the lock).
local function lock_handoff(k, last, now, retention, wake)
  local head, deadline, engine, arrival, owner = q_head(k.q, k.w, now)
  if not head then return false end
  q_leave(k.q, k.w, head)
  local f = counter_next(k.fence, last, retention)
  lock_grant(k, head, f, deadline - now, owner)
  q_wake(wake, engine, head, f, arrival)
  return true
end

-- lock_free frees the lock the caller has read: it goes to the first live
-- waiter, if any. queued is the queue's length as read (0: nobody waits,
-- and neither the clock nor the counter is needed), last the counter.
local function lock_free(k, queued, last, retention, wake)
  if queued > 0 and lock_handoff(k, last, now_ms(), retention, wake) then return end
  redis.call('DEL', k.lock)
end

-- lock_unlock frees the lock, whose holder the caller has checked: it
-- reads the queue (unless the caller did: queued) and, if someone waits,
-- the counter, then lock_free.
local function lock_unlock(k, retention, wake, queued)
  queued = queued or redis.call('ZCARD', k.q)
  local last = nil
  if queued > 0 then
    local err
    last, err = counter_read(k.fence)
    if err then return err end
  end
  lock_free(k, queued, last, retention, wake)
end
