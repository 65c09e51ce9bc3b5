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
-- entry and mark go, the hash is written again with 'v' alone ('d' and
-- 'q' deleted, and every lapsed mark), its PX the holder's remaining
-- lease; lapsed marks are deleted too by a flagged write past their
-- latest deadline ('q''s xd). The next queue's arrival numbers start
-- again from the clock in microseconds, as when the hash expires. The
-- slow path reads the holding with string.find, not a pattern, and each
-- field once (a pattern or a number formatted costs a script thousands
-- of the server's instructions: docs/handoff.md). An absent hash's next fence is the
-- server's clock in microseconds, above every fence before (as a fence
-- counter's after a restart, lib/queue.lua): a v4 counter is never
-- above it either.

-- lk_load reads the lock's hash (key) for a call of token's (nil: a
-- release's, which needs neither the token's entry nor its mark): the
-- holding as of the server's clock (a flagged lease past its end is
-- free), the queue's numbers, the token's entry number and its mark's
-- deadline. v is the holding as the caller read it ('v'; nil: read here).
-- Unflagged, the hash holds 'v' alone: nothing more is read but its PX.
local function lk_load(key, token, v)
  local c = redis.call('TIME')
  local now_us = tonumber(c[1]) * 1000000 + tonumber(c[2])
  -- every field in the constructor: one allocation, no rehash as it fills
  local st = {key = key, now = math.floor(now_us / 1000), now_us = now_us, flagged = false,
    exists = false, d = 0, floor = 0, fence = false, holder = false, value = false,
    mine = false, mark = false, h = 1, t = 0, n = 0, a = 0, as = '0', xd = 0, keep = 0, put = false, del = false}
  local s
  if not v then
    s = redis.call('HMGET', key, 'd', 'q', 'k:' .. token, 'x:' .. token, 'v')
    v = s[5]
  elseif string.byte(v, 1) == 43 then
    if token then
      s = redis.call('HMGET', key, 'd', 'q', 'k:' .. token, 'x:' .. token)
    else -- a release's
      s = redis.call('HMGET', key, 'd', 'q')
    end
  end
  if not v then return st end
  st.exists = true
  if string.byte(v, 1) == 43 then
    st.flagged, v = true, string.sub(v, 2)
    st.d = tonumber(s[1]) or 0
    if s[3] then st.mine = tonumber(s[3]) end
    if s[4] then st.mark = tonumber(s[4]) end
    local q = s[2]
    if q then -- "h t n a xd", read without a pattern
      local p1 = string.find(q, ' ', 1, true)
      local p2 = string.find(q, ' ', p1 + 1, true)
      local p3 = string.find(q, ' ', p2 + 1, true)
      local p4 = string.find(q, ' ', p3 + 1, true)
      st.h, st.t, st.n = tonumber(string.sub(q, 1, p1 - 1)), tonumber(string.sub(q, p1 + 1, p2 - 1)), tonumber(string.sub(q, p2 + 1, p3 - 1))
      st.a, st.as = tonumber(string.sub(q, p3 + 1, p4 - 1)), string.sub(q, p3 + 1, p4 - 1)
      if string.byte(q, p4 + 1) ~= 48 then st.xd = tonumber(string.sub(q, p4 + 1)) end -- '0': none
    end
  else
    st.d = st.now + redis.call('PTTL', key)
  end
  st.floor = st.d -- the hash's PX runs at least this far (server ms)
  -- the holding "token fence seq[ owner]" (free: "- fence"), read
  -- without a pattern
  local sp = string.find(v, ' ', 1, true)
  if not sp then return st end -- no lock's value: free
  local sp2 = string.find(v, ' ', sp + 1, true)
  st.fence = tonumber(string.sub(v, sp + 1, sp2 and sp2 - 1 or -1))
  if sp2 and st.fence and st.d > st.now then
    st.holder, st.value = string.sub(v, 1, sp - 1), v
  end
  return st
end

-- lk_entry returns entry i of the lock's hash, "token deadline arrival
-- engine[ owner]", as a table: its number, token, deadline, the text and
-- where its deadline ends (nil if gone).
local function lk_entry(st, i)
  local raw = redis.call('HGET', st.key, 'e:' .. i)
  if not raw then return nil end
  local a = string.find(raw, ' ', 1, true)
  local b = string.find(raw, ' ', a + 1, true)
  return {i = i, token = string.sub(raw, 1, a - 1), deadline = tonumber(string.sub(raw, a + 1, b - 1)), raw = raw, at = b}
end

-- lk_leave takes entry e out of the queue (its fields deleted by the
-- lk_save after it).
local function lk_leave(st, e)
  local del = st.del
  if del then
    del[#del + 1], del[#del + 2] = 'e:' .. e.i, 'k:' .. e.token
  else
    st.del = {'e:' .. e.i, 'k:' .. e.token}
  end
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

-- lk_hdel deletes fields of the lock's hash, a thousand a command at most
-- (Lua's unpack takes a few thousand values).
local function lk_hdel(key, fields)
  for i = 1, #fields, 1000 do
    redis.call('HDEL', key, unpack(fields, i, math.min(i + 999, #fields)))
  end
end

-- lk_hset is HSET of the lock's hash key, flagged, with the fields and
-- values given. At maxmemory (noeviction) Redis refuses a script's first
-- write that may grow memory, and lets every write after one run: a
-- refused HSET is sent again after deleting its first field (which it
-- writes again), a write Redis allows there, so that a release, a force,
-- an abandon mark and a pick-up go through; a join (st.join: a new
-- entry) is refused.
local function lk_hset(st, key, ...)
  if type(redis.pcall('HSET', key, ...)) == 'table' then
    if not st.join then redis.call('HDEL', key, (...)) end
    redis.call('HSET', key, ...)
  end
end

-- lk_unmark adds to st.del the fields of the hash's abandon marks, all
-- lapsed (their latest deadline, st.xd, passed): a name that stays
-- flagged does not keep them.
local function lk_unmark(st)
  local fields = redis.call('HKEYS', st.key)
  local del = st.del or {}
  st.del = del
  for _, f in ipairs(fields) do
    if string.sub(f, 1, 2) == 'x:' then del[#del + 1] = f end
  end
  st.xd = 0
end

-- lk_save writes the holding value (in this file's format, unflagged;
-- nil: the one read) whose lease ends at d (server ms; a free value's:
-- how long it is kept), flagged while an entry or a mark stands, with the
-- queue's numbers and the fields the call added (st.put), in one HSET,
-- after one HDEL of the fields the call took out (st.del); or, with
-- neither, the holding unflagged, 'v' alone, the hash's PX the rest of
-- the lease (none left: no key).
local function lk_save(st, value, d)
  -- a flagged holding kept as read (a join, an abandon mark behind a
  -- holder) is not written again: its 'v' and 'd' stand
  local same = not value and st.flagged and st.holder
  if not value then
    value, d = st.value, st.d
    if not st.holder then
      value = '- ' .. fmt(st.fence or st.now_us)
    end
  end
  d = d or 0
  local key, now = st.key, st.now
  if st.n > 0 or st.xd > now then
    if st.xd > 0 and st.xd <= now then lk_unmark(st) end
    if st.del then lk_hdel(key, st.del) end
    local q = string.format('%d %d %d ', st.h, st.t, st.n) .. st.as .. (st.xd > 0 and ' ' .. fmt(st.xd) or ' 0')
    if same then
      if st.put then
        lk_hset(st, key, 'q', q, unpack(st.put))
      else
        lk_hset(st, key, 'q', q)
      end
    elseif st.put then
      lk_hset(st, key, 'v', '+' .. value, 'd', fmt(d), 'q', q, unpack(st.put))
    else
      lk_hset(st, key, 'v', '+' .. value, 'd', fmt(d), 'q', q)
    end
    local keep = d
    if st.xd > keep then keep = st.xd end
    if st.keep > keep then keep = st.keep end
    if keep > st.floor and (not st.flagged or redis.call('PTTL', key) < keep - now) then
      redis.call('PEXPIRE', key, keep - now)
    end
    return
  end
  if d > now then
    if st.xd > 0 then -- lapsed marks: the hash written anew
      redis.call('DEL', key)
    elseif st.flagged then
      local del = st.del or {}
      del[#del + 1], del[#del + 2] = 'd', 'q'
      lk_hdel(key, del)
    elseif st.exists then
      -- 'v' alone: its PX first, a write Redis allows at maxmemory, so
      -- that the HSET after it runs there too (lk_hset)
      redis.call('PEXPIRE', key, d - now)
      redis.call('HSET', key, 'v', value)
      return
    end
    redis.call('HSET', key, 'v', value)
    redis.call('PEXPIRE', key, d - now)
  elseif st.exists then
    redis.call('DEL', key)
  end
end

-- lk_join queues token at the tail, or extends its entry to entry_ms from
-- now if it is queued (written by the lk_save after it): as lib/queue.lua's q_join (rank: entries ahead,
-- lapsed ones included; arrival 0 for an extension, else the last plus
-- one, at least the clock in microseconds). engine and owner (nil: none)
-- go with a new entry.
local function lk_join(st, token, entry_ms, engine, owner)
  local deadline = st.now + entry_ms
  if deadline > st.keep then st.keep = deadline end
  local e = st.mine and st.mine >= st.h and lk_entry(st, st.mine)
  local put = st.put or {}
  st.put = put
  if e and e.token == token then
    put[#put + 1], put[#put + 2] = 'e:' .. e.i, token .. ' ' .. fmt(deadline) .. string.sub(e.raw, e.at)
    return e.i - st.h, 0
  end
  local i = st.t + 1
  st.join = true -- a new entry: refused at maxmemory (lk_hset)
  local arrival = st.now_us
  if arrival <= st.a then arrival = st.a + 1 end
  local as, is = fmt(arrival), string.format('%d', i)
  local entry = token .. ' ' .. fmt(deadline) .. ' ' .. as .. ' ' .. engine
  if owner then entry = entry .. ' ' .. owner end
  if st.n == 0 then st.h = i end
  put[#put + 1], put[#put + 2], put[#put + 3], put[#put + 4] = 'e:' .. is, entry, 'k:' .. token, is
  st.t, st.a, st.as, st.n = i, arrival, as, st.n + 1
  return i - st.h, arrival
end

-- lk_free frees the lock whose holder the caller has checked (or which a
-- force frees): it goes to the first live waiter, whose lease runs to its
-- entry's deadline and whom wake wakes (lib/queue.lua's q_send); if none,
-- the last fence is kept for the rest of the lease.
local function lk_free(st, wake)
  local head = st.n > 0 and lk_head(st)
  if head then
    lk_leave(st, head)
    st.h = head.i + 1 -- the next in line
    local f = fmt(lk_fence(st))
    local raw, at = head.raw, head.at
    local a = string.find(raw, ' ', at + 1, true) -- the arrival's end
    local o = string.find(raw, ' ', a + 1, true) -- the engine's
    -- the hash's PX already runs to every entry's deadline (the write of
    -- each made it so): the new lease, the entry's, needs no PTTL read
    if head.deadline > st.floor then st.floor = head.deadline end
    lk_save(st, head.token .. ' ' .. f .. ' 0' .. (o and string.sub(raw, o) or ''), head.deadline)
    q_send(wake, string.sub(raw, a + 1, o and o - 1 or -1), head.token .. ' ' .. f .. ' ' .. string.sub(raw, at + 1, a - 1))
    return
  end
  lk_save(st, '- ' .. fmt(st.fence or st.now_us), st.d)
end
