-- semaphore_abandon: abandon an acquire or a wait whose caller gave up. A
-- permit may have been granted or handed to it (give it back, and its slot
-- to the next waiter), it may be queued (leave), and a call of its may
-- still be on its way on another connection (void the token, so it takes
-- nothing and queues nowhere when it lands).
-- KEYS as semaphore_acquire: KEYS[1] timeouts, KEYS[2] owner, KEYS[3]
-- counter, KEYS[4] limit, KEYS[5] queue, KEYS[6] waiters, KEYS[7] owners,
-- KEYS[8] the token's abandon mark
-- ARGV[1] id, ARGV[2] ms the token's mark is kept (the call timeout),
-- ARGV[3] fence retention in ms, ARGV[4] wake channel prefix
-- reply: 1 if a permit was given back, 0 otherwise.
local k = {timeouts = KEYS[1], owner = KEYS[2], counter = KEYS[3], limit = KEYS[4], q = KEYS[5], w = KEYS[6],
  owners = KEYS[7]}
local st, err = sem_read(k)
if err then return err end
redis.call('ZCARD', k.timeouts) -- its type, before the first write
local now = now_ms()
redis.call('SET', KEYS[8], 1, 'PX', ARGV[2])
q_leave(k.q, k.w, ARGV[1])
local live = sem_drop(k, st, ARGV[1], now)
sem_purge(k, st, now)
sem_settle(k, st, now, ARGV[3], ARGV[4])
if live then
  return 1
end
return 0
