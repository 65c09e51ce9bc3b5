-- lock_acquire: take the lock if it is free and no live waiter is queued
-- ahead of the caller; otherwise, in wait mode, queue (or extend the
-- caller's queue entry). A waiter the lock was handed to picks it up here
-- if its wake-up did not reach it.
-- KEYS[1] the lock's hash (lib/lock.lua: the holding, the queue and the
-- abandon marks)
-- ARGV[1] token, ARGV[2] lease in ms, ARGV[3] mode: 0 one try (also if
-- absent, and then so are the rest), 1 wait, 2 wait and the caller
-- believes it is queued, ARGV[4] queue entry lifetime in ms, ARGV[5] the
-- caller's engine id, ARGV[6] the Owner to store with the holding
-- (absent: none)
-- reply: fence (an integer) if the caller took the lock just now, free
-- and unflagged; {1, fence} if the caller holds the lock now otherwise,
-- for the full lease;
-- {0, holder's remaining lease in ms (-1: free, but live waiters are
-- ahead; also -1 for a waiter not at the head, which needs no hint), rank
-- in the queue (0 = head; one try: how many are queued), arrival number
-- (0 unless it just queued)} if not; {2} if the caller abandoned this
-- token.
--
-- The common case comes first and alone: the hash absent or free and
-- unflagged ("- fence": nobody queued, no abandon mark), so the holding
-- is written and the lease is the hash's PX, with no clock read but for
-- an absent hash's fence. A key of another type (a v4 engine's lock, a
-- string) fails the first HGET with nothing written.
local v = redis.call('HGET', KEYS[1], 'v')
local f
if not v then
  local t = redis.call('TIME')
  f = tonumber(t[1]) * 1000000 + tonumber(t[2])
elseif string.byte(v, 1) == 45 and string.byte(v, 2) == 32 then
  f = tonumber(string.sub(v, 3)) + 1
end
if f then -- the common case
  -- lib/queue.lua's fmt, inline: '%.0f' costs the server about 5,000
  -- instructions more (a C double's exact printing)
  local value = ARGV[1] .. ' ' .. (f < 1e9 and string.format('%d', f) or string.format('%d%09d', math.floor(f / 1e9), f % 1e9)) .. ' 0'
  if ARGV[6] then value = value .. ' ' .. ARGV[6] end
  redis.call('HSET', KEYS[1], 'v', value)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return f
end
-- A new waiter behind a flagged holder (a hot name's queue, the lock
-- held, the caller neither queued nor marked, no lapsed mark to clear):
-- read, checked and written here, before the shared Lua is defined; it
-- does what lib/lock.lua's lk_load, lk_join and lk_save do for it, which
-- every other case goes through. The holding and its lease's end stand
-- as read; a join at maxmemory is refused (its HSET, the first write).
if string.byte(v, 1) == 43 and ARGV[3] == '1' then
  local t = ARGV[1]
  local s = redis.call('HMGET', KEYS[1], 'd', 'q', 'k:' .. t, 'x:' .. t)
  local q = s[2]
  local sp = string.find(v, ' ', 2, true)
  local sp2 = sp and string.find(v, ' ', sp + 1, true)
  local holder = sp2 and string.sub(v, 2, sp - 1)
  if q and not s[3] and not s[4] and holder and holder ~= t and holder ~= '-' then
    local c = redis.call('TIME')
    local now_us = tonumber(c[1]) * 1000000 + tonumber(c[2])
    local now = math.floor(now_us / 1000)
    local d = tonumber(s[1]) or 0
    -- "h t n a xd", read without a pattern
    local p1 = string.find(q, ' ', 1, true)
    local p2 = string.find(q, ' ', p1 + 1, true)
    local p3 = string.find(q, ' ', p2 + 1, true)
    local p4 = string.find(q, ' ', p3 + 1, true)
    local xs = string.sub(q, p4 + 1)
    if d > now and (xs == '0' or tonumber(xs) > now) then
      local h, i, n = tonumber(string.sub(q, 1, p1 - 1)), tonumber(string.sub(q, p1 + 1, p2 - 1)) + 1, tonumber(string.sub(q, p2 + 1, p3 - 1))
      local arrival = now_us
      if arrival <= tonumber(string.sub(q, p3 + 1, p4 - 1)) then arrival = tonumber(string.sub(q, p3 + 1, p4 - 1)) + 1 end
      local deadline = now + tonumber(ARGV[4])
      -- lib/queue.lua's fmt, inline
      local as = arrival < 1e9 and string.format('%d', arrival) or string.format('%d%09d', math.floor(arrival / 1e9), arrival % 1e9)
      local ds = deadline < 1e9 and string.format('%d', deadline) or string.format('%d%09d', math.floor(deadline / 1e9), deadline % 1e9)
      local entry = t .. ' ' .. ds .. ' ' .. as .. ' ' .. ARGV[5]
      if ARGV[6] then entry = entry .. ' ' .. ARGV[6] end
      if n == 0 then h = i end
      local is = string.format('%d', i)
      redis.call('HSET', KEYS[1], 'q', string.format('%d %d %d ', h, i, n + 1) .. as .. ' ' .. xs, 'e:' .. is, entry, 'k:' .. t, is)
      -- the hash's PX runs at least to the lease's end and every mark's
      if deadline > d and redis.call('PTTL', KEYS[1]) < deadline - now then
        redis.call('PEXPIRE', KEYS[1], deadline - now)
      end
      if i == h then return {0, d - now, 0, arrival} end -- the head takes over when the lease ends
      return {0, -1, i - h, arrival}
    end
  end
end
-- (libraries)
local token, once = ARGV[1], not ARGV[3] or ARGV[3] == '0'
if string.byte(v, 1) ~= 43 then -- unflagged and held: its lease is the hash's PX
  local sp = string.find(v, ' ', 1, true)
  local mine = sp and string.sub(v, 1, sp - 1) == token
  if mine or (sp and once) then
    local sp2 = string.find(v, ' ', sp + 1, true)
    f = sp2 and tonumber(string.sub(v, sp + 1, sp2 - 1)) -- nil: no lock's value (lk_load: free)
    if f and mine then -- handed over while queued: pick it up
      redis.call('PEXPIRE', KEYS[1], ARGV[2])
      return {1, f}
    end
    if f then
      return {0, redis.call('PTTL', KEYS[1]), 0, 0}
    end
  end
end
local st = lk_load(KEYS[1], token, v)
if st.holder == token then -- handed over while queued: pick it up
  lk_save(st, st.value, st.now + tonumber(ARGV[2]))
  return {1, st.fence}
end
if st.mark and st.mark > st.now then
  return {2}
end
-- The queue's head is read only for a free lock: a join behind a holder
-- needs no more than the tail (its rank counts lapsed entries ahead; the
-- release walks past them).
local head = not st.holder and st.n > 0 and lk_head(st)
if not st.holder then -- free: the caller takes it unless a live waiter is ahead
  if not head or head.token == token then
    if head then lk_leave(st, head) end
    f = lk_fence(st)
    lk_save(st, lock_value(token, f, '0', ARGV[6]), st.now + tonumber(ARGV[2]))
    return {1, f}
  end
  if once then
    lk_save(st)
    return {0, -1, st.n, 0}
  end
elseif once then
  if st.flagged then lk_save(st) end
  return {0, st.d - st.now, st.n, 0}
end
local rank, arrival = lk_join(st, token, tonumber(ARGV[4]), ARGV[5], ARGV[6])
lk_save(st)
local pttl = -1
if st.holder and rank == 0 then
  pttl = st.d - st.now -- the head takes over when the lease ends
end
return {0, pttl, rank, arrival}
