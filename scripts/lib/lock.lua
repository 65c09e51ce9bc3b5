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

-- The plain lock's one key (v5), a hash; elections keep the string layout
-- above (scripts/election_lock_*.lua) until they move to it. Fields:
--   v     the holding: this file's lock value "token fence seq[ owner]"
--         while held, "- fence" while free (the last fence, kept); with a
--         "+" in front while the lock is flagged
--   d     (flagged) the holder's lease's end, server ms
--   q     the queue's numbers, "h t n a xd": its head and tail entry
--         numbers, how many entries, the last arrival number given, the
--         latest abandon mark's deadline (one field: a field read costs
--         a search of the hash)
--   e:<i> queue entry i: "token deadline arrival engine[ owner]"
--   k:<token>  the number of the token's entry
--   x:<token>  the token's abandon mark: its deadline, server ms
-- Unflagged (no entry, no mark standing) the hash holds 'v' alone and the
-- lease is its PX, so the common path never reads the clock; a free
-- value is kept for the rest of the lease. Flagged, the hash is kept at
-- least to the latest of the lease's end, every entry's deadline and
-- every mark's, and the clock decides the lease ('d'). When the last
-- entry and mark go, the hash is written again with 'v' alone, its PX
-- the holder's remaining lease. An absent hash's next fence is the
-- server's clock in microseconds, above every fence before (as a fence
-- counter's after a restart, lib/queue.lua): a v4 counter is never
-- above it either.

-- lk_load reads the lock's hash (key) for token's call: the holding as
-- of the server's clock (a flagged lease past its end is free), the
-- queue's numbers, the token's entry number and its mark's deadline. v is
-- the holding as the caller read it ('v'; nil: read here).
local function lk_load(key, token, v)
  local s = redis.call('HMGET', key, 'd', 'q', 'k:' .. token, 'x:' .. token, v and 'd' or 'v')
  v = v or s[5]
  local now, now_us = now_ms()
  local st = {key = key, now = now, now_us = now_us, flagged = false, keep = 0, put = {},
    h = 1, t = 0, n = 0, a = 0, xd = 0, mine = tonumber(s[3]), mark = tonumber(s[4])}
  if s[2] then
    local h, t, n, a, xd = string.match(s[2], '^(%d+) (%d+) (%d+) (%d+) (%d+)$')
    st.h, st.t, st.n, st.a, st.xd = tonumber(h), tonumber(t), tonumber(n), tonumber(a), tonumber(xd)
  end
  if v and string.byte(v, 1) == 43 then
    st.flagged, v = true, string.sub(v, 2)
  end
  st.exists = v ~= nil
  local holder, fence, _, owner = lock_parse(v)
  if holder then
    st.fence = fence
    if st.flagged then
      st.d = tonumber(s[1]) or 0
    else
      st.d = now + redis.call('PTTL', key)
    end
    if st.d > now then
      st.holder, st.value, st.owner = holder, v, owner
    end
  elseif v then
    local last = string.match(v, '^%- (%d+)')
    st.fence = last and tonumber(last)
    if st.flagged then st.d = 0 else st.d = now + redis.call('PTTL', key) end
  end
  st.floor = st.d or 0 -- the hash's PX runs at least this far (server ms)
  return st
end

-- lk_entry returns entry i of the lock's hash as a table (nil if gone).
local function lk_entry(st, i)
  local e = redis.call('HGET', st.key, 'e:' .. i)
  if not e then return nil end
  local token, deadline, arrival, engine, owner = string.match(e, '^(%S+) (%d+) (%d+) (%S+) ?(.*)$')
  if owner == '' then owner = nil end
  return {i = i, token = token, deadline = tonumber(deadline), arrival = tonumber(arrival), engine = engine, owner = owner, raw = e}
end

-- lk_leave takes entry e out of the queue.
local function lk_leave(st, e)
  redis.call('HDEL', st.key, 'e:' .. e.i, 'k:' .. e.token)
  st.n = st.n - 1
end

-- lk_head returns the first live entry, dropping lapsed ones in front of
-- it (st.h moves to it); nil if none is queued.
local function lk_head(st)
  local i = st.h
  while st.n > 0 and i <= st.t do
    local e = lk_entry(st, i)
    if e then
      if e.deadline > st.now then
        st.h = i
        return e
      end
      lk_leave(st, e)
    end
    i = i + 1
  end
  st.h = i
  return nil
end

-- lk_fence is the fence after the last one (the clock's if none is known).
local function lk_fence(st)
  if st.fence then return st.fence + 1 end
  return st.now_us
end

-- lk_numbers is the queue's numbers as 'q' holds them.
local function lk_numbers(st)
  return string.format('%d %d %d %.0f %.0f', st.h, st.t, st.n, st.a, st.xd)
end

-- lk_save writes the holding value (in this file's format, unflagged;
-- nil: the one read) whose lease ends at d (server ms; a free value's:
-- how long it is kept), flagged while an entry or a mark stands, with the
-- queue's numbers and the fields the call added (st.put), in one HSET; or,
-- with neither, the holding unflagged, the hash's PX the rest of the lease
-- (none left: no key). The queue's numbers stay behind (its tail, its
-- last arrival), unread while unflagged; a mark's field does not: a hash
-- that had marks is written anew.
local function lk_save(st, value, d)
  if not value then
    value, d = st.value, st.d
    if not st.holder then
      value = '- ' .. fmt(st.fence or st.now_us)
    end
  end
  d = d or 0
  if st.n > 0 or st.xd > st.now then
    redis.call('HSET', st.key, 'v', '+' .. value, 'd', fmt(d), 'q', lk_numbers(st), unpack(st.put))
    local keep = math.max(d, st.xd, st.keep)
    if keep > st.floor and redis.call('PTTL', st.key) < keep - st.now then
      redis.call('PEXPIRE', st.key, keep - st.now)
    end
    return
  end
  if d > st.now then
    if st.xd > 0 then
      redis.call('DEL', st.key)
      redis.call('HSET', st.key, 'v', value)
    elseif st.flagged then -- the queue emptied: its count says so
      redis.call('HSET', st.key, 'v', value, 'q', lk_numbers(st))
    else
      redis.call('HSET', st.key, 'v', value)
    end
    redis.call('PEXPIRE', st.key, d - st.now)
  elseif st.exists then
    redis.call('DEL', st.key)
  end
end

-- lk_join queues token at the tail, or extends its entry to entry_ms from
-- now if it is queued (written by the lk_save after it): as lib/queue.lua's q_join (rank: entries ahead,
-- lapsed ones included; arrival 0 for an extension, else the last plus
-- one, at least the clock in microseconds). engine and owner (nil: none)
-- go with a new entry.
local function lk_join(st, token, entry_ms, engine, owner)
  local deadline = st.now + entry_ms
  st.keep = math.max(st.keep, deadline)
  local e = st.mine and st.mine >= st.h and lk_entry(st, st.mine)
  if e and e.token == token then
    local rest = string.match(e.raw, '^%S+ %d+ (.*)$')
    local put = st.put
    put[#put + 1], put[#put + 2] = 'e:' .. e.i, token .. ' ' .. fmt(deadline) .. ' ' .. rest
    return e.i - st.h, 0
  end
  local i = st.t + 1
  local arrival = math.max(st.a + 1, st.now_us)
  local entry = token .. ' ' .. fmt(deadline) .. ' ' .. fmt(arrival) .. ' ' .. engine
  if owner then entry = entry .. ' ' .. owner end
  if st.n == 0 then st.h = i end
  local put = st.put
  put[#put + 1], put[#put + 2], put[#put + 3], put[#put + 4] = 'e:' .. i, entry, 'k:' .. token, fmt(i)
  st.t, st.a, st.n = i, arrival, st.n + 1
  return i - st.h, arrival
end

-- lk_free frees the lock whose holder the caller has checked (or which a
-- force frees): it goes to the first live waiter, whose lease runs to its
-- entry's deadline and whom wake wakes (lib/queue.lua's q_wake); if none,
-- the last fence is kept for the rest of the lease.
local function lk_free(st, wake)
  local head = st.n > 0 and lk_head(st)
  if head then
    lk_leave(st, head)
    local f = lk_fence(st)
    lk_save(st, lock_value(head.token, f, '0', head.owner), head.deadline)
    q_wake(wake, head.engine, head.token, f, head.arrival)
    return
  end
  lk_save(st, '- ' .. fmt(st.fence or st.now_us), st.d)
end
