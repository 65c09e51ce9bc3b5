-- rw_acquire: take a read or a write hold of a read-write lock if the holds
-- allow it and no live waiter is queued ahead of the caller; otherwise, in
-- wait mode, queue (or extend the caller's queue entry). Waiters the lock
-- can go to are admitted first, in order. A waiter handed a hold picks it
-- up here if its wake-up did not reach it.
-- KEYS[1] leases (zset token -> lease deadline, server ms), KEYS[2] holds
-- (hash, see lib/rw.lua), KEYS[3] fence counter, KEYS[4] queue, KEYS[5]
-- waiters, KEYS[6] this token's abandon mark (set by rw_abandon when the
-- caller gave up)
-- ARGV[1] token ("r-..." a reader, "w-..." a writer), ARGV[2] mode: 0 one
-- try, 1 wait, 2 wait and the caller believes it is queued, ARGV[3] queue
-- entry lifetime in ms, ARGV[4] lease in ms, ARGV[5] fence retention in
-- ms, ARGV[6] the caller's engine id, ARGV[7] wake channel prefix, ARGV[8]
-- the Owner to store with the hold (absent: none; it goes with the queue
-- entry, so a handoff stores it)
-- reply: {1, fence} if the caller holds now, for the full lease; {0, ms
-- until the last live hold runs out (-1: none, but waiters are ahead),
-- rank in the queue (0 = head; one try: how many are queued), arrival
-- number (0 unless it just queued)} if not; {2} if the caller abandoned
-- this token.
--
-- A reader that arrives while a writer waits queues behind it, so writers
-- never starve; a one-try caller never jumps a queue of live waiters.
local k = {leases = KEYS[1], holds = KEYS[2], fence = KEYS[3], q = KEYS[4], w = KEYS[5],
  retention = ARGV[5], wake = ARGV[7]}
local now, now_micros = now_ms()
local token, ttl, owner = ARGV[1], tonumber(ARGV[4]), ARGV[8]

local lease = redis.call('ZSCORE', k.leases, token)
if lease and tonumber(lease) > now then
  -- Handed over while queued (with its fence), or granted by a call of
  -- this token whose reply was lost (a new fence: that one never arrived).
  local err = rw_check(k)
  if err then return err end
  local f = redis.call('HGET', k.holds, 'f:' .. token)
  f = tonumber(f) or rw_fence(k)
  redis.call('ZADD', k.leases, now + ttl, token)
  rw_expire(k, now, true)
  return {1, f}
end
if redis.call('EXISTS', KEYS[6]) == 1 then
  return {2}
end

-- Read what this call may write (type errors before the first write).
local err = rw_fence_ok(k)
if err then return err end
local queued = redis.call('ZCARD', k.q)
local waiters = queued > 0
if waiters or ARGV[2] ~= '0' then
  redis.call('HLEN', k.w)
end
local holder, expired = rw_first(k, now)
if waiters or expired or owner then
  redis.call('HLEN', k.holds)
end

local f, handed, blocked = nil, false, false
if expired then
  rw_purge(k, now)
  holder = rw_holder(k)
end
if waiters then -- waiters first, in order
  f, handed, blocked = rw_admit(k, now, token)
  holder = rw_holder(k)
end
if not f and not blocked and not rw_blocked(token, holder) then
  f = rw_fence(k) -- nobody queued, nothing in the way
end
if f then
  redis.call('ZADD', k.leases, now + ttl, token)
  if owner then
    redis.call('HSET', k.holds, 'o:' .. token, owner)
  end
  if holder or handed then
    rw_expire(k, now, handed or owner ~= nil)
  else
    redis.call('PEXPIRE', k.leases, ttl) -- the only hold
    if owner then
      redis.call('PEXPIRE', k.holds, ttl)
    end
  end
  return {1, f}
end

local last = rw_last(k)
if handed or expired then
  rw_expire(k, now, handed)
end
local hint = -1
if last then
  hint = math.max(last - now, 1)
end
if ARGV[2] == '0' then
  return {0, hint, queued, 0}
end
local rank, arrival = q_join(k.q, k.w, token, now, now_micros, tonumber(ARGV[3]), ARGV[6], queued, ARGV[2] == '2', owner)
return {0, hint, rank, arrival}
