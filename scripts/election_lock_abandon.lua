-- election_lock_abandon: v4's lock_abandon, the string layout elections keep until they move to the plain lock's hash (lib/lock.lua): abandon an acquire or a wait whose caller gave up. The lock
-- may have been taken or handed to the caller (then pass it on), the caller
-- may be queued (then leave), and a call of the caller's may still be on
-- its way on another connection (so void the token: it takes nothing and
-- queues nowhere when it lands).
-- KEYS as lock_acquire: KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue,
-- KEYS[4] waiters, KEYS[5] the token's abandon mark
-- ARGV[1] token, ARGV[2] ms the token's mark is kept (the call timeout: how
-- long a late call may still land), ARGV[3] fence retention in ms, ARGV[4]
-- wake channel prefix
-- reply: 1 if the caller held the lock and it was passed on or freed, 0
-- otherwise.
local k = {lock = KEYS[1], fence = KEYS[2], q = KEYS[3], w = KEYS[4]}
local held = lock_read(k.lock) == ARGV[1]
local last, err = counter_read(k.fence)
if err then return err end
local queued = redis.call('ZCARD', k.q)
redis.call('HLEN', k.w)
redis.call('SET', KEYS[5], 1, 'PX', ARGV[2])
q_leave(k.q, k.w, ARGV[1])
if held then
  lock_free(k, queued, last, ARGV[3], ARGV[4])
  return 1
end
return 0
