-- lock_acquire: take the lock if it is free and no live waiter is queued
-- ahead of the caller; otherwise, in wait mode, queue (or renew the
-- caller's queue entry). A waiter the lock was handed to picks it up here.
-- KEYS[1] lock (hash: token, seq, fence), KEYS[2] fence counter (no TTL),
-- KEYS[3] queue, KEYS[4] waiters, KEYS[5] this engine's inbox, KEYS[6] this
-- token's void mark (set by lock_abandon when the caller gave up)
-- ARGV[1] token, ARGV[2] mode: 0 one try, 1 wait, ARGV[3] queue entry
-- lifetime in ms, ARGV[4] lease in ms
-- reply: {1, fence} if the caller holds the lock now, for the full lease;
-- {0, holder's PTTL in ms (-1: free, but waiters are ahead), rank in the
-- queue (0 = head; -1 = not queued), arrival number} if not; {0, -2} if
-- the caller abandoned this token.
--
-- Every key is read before anything is written, so a key of the wrong type
-- fails the script with nothing changed. The fence is INCRed in the same
-- script as the lease is set: no taker ever goes without one (seed 002,
-- failure 4). A one-try caller never jumps a queue of live waiters.
local fence = redis.call('GET', KEYS[2])
if fence and not string.match(fence, '^%d+$') then
  return redis.error_reply('ERR atomicredis: fence key does not hold a counter')
end
local queued = q_check(KEYS[3], KEYS[4])
local holder = redis.call('HGET', KEYS[1], 'token')
if holder == ARGV[1] then -- handed over while queued: pick it up
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {1, tonumber(redis.call('HGET', KEYS[1], 'fence'))}
end
if redis.call('EXISTS', KEYS[6]) == 1 then
  return {0, -2}
end
-- With nobody queued (the common case) there is no clock to read and no
-- queue to walk.
local now, head = 0, nil
if queued > 0 then
  now = now_ms()
  head = q_head(KEYS[3], KEYS[4], now)
end
if not holder and (not head or head == ARGV[1]) then
  if head then
    q_leave(KEYS[3], KEYS[4], ARGV[1])
  end
  local f = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'token', ARGV[1], 'seq', 0, 'fence', f)
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {1, f}
end
local pttl = -1
if holder then
  pttl = redis.call('PTTL', KEYS[1])
end
if ARGV[2] == '0' then
  return {0, pttl, -1, 0}
end
if now == 0 then
  now = now_ms()
end
local rank, arrival = q_join(KEYS[3], KEYS[4], ARGV[1], now, tonumber(ARGV[3]), KEYS[5])
return {0, pttl, rank, arrival}
