-- lock_abandon: undo an acquire or a wait whose caller gave up. The lock
-- may have been taken or handed to the caller (then pass it on), the caller
-- may be queued (then leave), and a call of the caller's may still be on
-- its way on another connection (so void the token: it takes nothing and
-- queues nowhere when it lands).
-- KEYS as lock_acquire: KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue,
-- KEYS[4] waiters, KEYS[5] this engine's inbox, KEYS[6] the token's void mark
-- ARGV[1] token, ARGV[2] ms a late call could still act for (the longer of
-- the lease and the queue entry's lifetime)
-- reply: 1 if the caller held the lock and it was passed on or freed, 0
-- otherwise.
q_check(KEYS[3], KEYS[4])
redis.call('LLEN', KEYS[5])
local held = redis.call('HGET', KEYS[1], 'token') == ARGV[1]
redis.call('SET', KEYS[6], 1, 'PX', ARGV[2])
q_leave(KEYS[3], KEYS[4], ARGV[1])
q_unwake(KEYS[5], ARGV[1])
if held then
  redis.call('DEL', KEYS[1])
  lock_handoff(KEYS[1], KEYS[2], KEYS[3], KEYS[4])
  return 1
end
return 0
