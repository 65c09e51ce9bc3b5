-- semaphore_abandon: undo an acquire or a wait whose caller gave up. A
-- permit may have been granted or handed to it (give it back, and its slot
-- to the next waiter), it may be queued (leave), and a call of its may
-- still be on its way on another connection (void the token, so it takes
-- nothing and queues nowhere when it lands).
-- KEYS as semaphore_acquire: KEYS[1] timeouts, KEYS[2] owner, KEYS[3]
-- counter, KEYS[4] limit, KEYS[5] queue, KEYS[6] waiters, KEYS[7] this
-- engine's inbox, KEYS[8] the token's void mark
-- ARGV[1] id, ARGV[2] ms a late call could still act for
-- reply: 1 if a permit was given back, 0 otherwise.
local k = {timeouts = KEYS[1], owner = KEYS[2], counter = KEYS[3], limit = KEYS[4], q = KEYS[5], w = KEYS[6]}
local _, err = sem_check(k)
if err then return err end
redis.call('LLEN', KEYS[7])
local now = now_ms()
local had = redis.call('ZSCORE', k.timeouts, ARGV[1])
redis.call('SET', KEYS[8], 1, 'PX', ARGV[2])
q_leave(k.q, k.w, ARGV[1])
q_unwake(KEYS[7], ARGV[1])
if had then
  redis.call('ZREM', k.timeouts, ARGV[1])
  redis.call('ZREM', k.owner, ARGV[1])
  sem_purge(k, now)
  sem_settle(k, now)
  return 1
end
return 0
