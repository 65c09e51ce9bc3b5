-- election_lock_acquire: v4's lock_acquire, the string layout elections keep until they move to the plain lock's hash (lib/lock.lua): take the lock if it is free and no live waiter is queued
-- ahead of the caller; otherwise, in wait mode, queue (or extend the
-- caller's queue entry). A waiter the lock was handed to picks it up here
-- if its wake-up did not reach it.
-- KEYS[1] lock (lib/lock.lua's value), KEYS[2] fence counter, KEYS[3]
-- queue, KEYS[4] waiters, KEYS[5] this token's abandon mark (set by
-- lock_abandon when the caller gave up)
-- ARGV[1] token, ARGV[2] mode: 0 one try, 1 wait, 2 wait and the caller
-- believes it is queued, ARGV[3] queue entry lifetime in ms, ARGV[4] lease
-- in ms, ARGV[5] fence retention in ms, ARGV[6] the caller's engine id
-- (see lib/queue.lua); ARGV[7] (the wake channel prefix, which every
-- acquire script is given) is not needed: a lock_acquire hands the lock to
-- nobody else; ARGV[8] the Owner to store with the holding (absent: none)
-- reply: {1, fence} if the caller holds the lock now, for the full lease;
-- {0, holder's PTTL in ms (-1: free, but live waiters are ahead; also -1
-- for a waiter not at the head, which needs no hint), rank in the queue
-- (0 = head; one try: how many are queued), arrival number (0 unless it
-- just queued)} if not; {2} if the caller abandoned this token.
--
-- Every key is read before anything is written, so a key of the wrong type
-- fails the script with nothing changed (the waiters hash by its first
-- write, before any other). The fence is set in the same script as the
-- lease: no taker ever goes without one. A one-try caller never jumps a
-- queue of live waiters. The common case comes first and alone: the lock
-- free, nobody queued, the token not abandoned (one EXISTS for both), the
-- counter INCRed (its first write, so a counter of the wrong type fails it
-- with nothing written) and its retention renewed, the lock SET; the
-- shared Lua after it is only defined when it is needed. While another
-- holds the lock, a waiter reads neither the counter nor the queue's head.
local token = ARGV[1]
local v = redis.call('GET', KEYS[1])
if not v and redis.call('EXISTS', KEYS[3], KEYS[5]) == 0 then -- the common case
  local f = redis.call('INCR', KEYS[2])
  if f == 1 then -- the counter was gone: start from the clock
    local t = redis.call('TIME')
    f = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('SET', KEYS[2], string.format('%.0f', f), 'PX', ARGV[5])
  else
    redis.call('PEXPIRE', KEYS[2], ARGV[5])
  end
  local value = token .. ' ' .. string.format('%.0f', f) .. ' 0'
  if ARGV[8] then value = value .. ' ' .. ARGV[8] end
  redis.call('SET', KEYS[1], value, 'PX', ARGV[4])
  return {1, f}
end
-- (libraries)
local k = {lock = KEYS[1], fence = KEYS[2], q = KEYS[3], w = KEYS[4]}
local holder, fence = lock_parse(v)
if holder == token then -- handed over while queued: pick it up
  redis.call('PEXPIRE', k.lock, ARGV[4])
  return {1, fence}
end
local queued = redis.call('ZCARD', k.q)
if redis.call('EXISTS', KEYS[5]) == 1 then
  return {2}
end
local now, now_micros = 0, nil
if not holder then -- free: the caller takes it unless a live waiter is ahead
  local last, err = counter_read(k.fence)
  if err then return err end
  local head = nil
  if queued > 0 then
    now, now_micros = now_ms()
    head = q_head(k.q, k.w, now)
  end
  if not head or head == token then
    if head then
      q_leave(k.q, k.w, token)
    end
    local f = counter_next(k.fence, last, ARGV[5])
    lock_grant(k, token, f, ARGV[4], ARGV[8])
    return {1, f}
  end
  if ARGV[2] == '0' then
    return {0, -1, queued, 0}
  end
elseif ARGV[2] == '0' then
  return {0, redis.call('PTTL', k.lock), queued, 0}
end
if now == 0 then
  now, now_micros = now_ms()
end
local rank, arrival = q_join(k.q, k.w, token, now, now_micros, tonumber(ARGV[3]), ARGV[6], queued, ARGV[2] == '2', ARGV[8])
local pttl = -1
if holder and rank == 0 then
  pttl = redis.call('PTTL', k.lock) -- the head takes over when the lease ends
end
return {0, pttl, rank, arrival}
