-- rw_abandon: abandon an acquire or a wait whose caller gave up. A hold may
-- have been granted or handed to it (give it back), it may be queued
-- (leave: a writer leaving may let the readers behind it in), and a call
-- of its may still be on its way on another connection (void the token, so
-- it takes nothing and queues nowhere when it lands).
-- KEYS as rw_acquire: KEYS[1] leases, KEYS[2] holds, KEYS[3] fence counter,
-- KEYS[4] queue, KEYS[5] waiters, KEYS[6] the token's abandon mark
-- ARGV[1] token, ARGV[2] ms the token's mark is kept (the call timeout: how
-- long a late call may still land), ARGV[3] fence retention in ms, ARGV[4]
-- wake channel prefix
-- reply: 1 if the caller held and gave it back, 0 otherwise.
local k = {leases = KEYS[1], holds = KEYS[2], fence = KEYS[3], q = KEYS[4], w = KEYS[5],
  retention = ARGV[3], wake = ARGV[4]}
local err = rw_check(k)
if err then return err end
local now = now_ms()
local lease = redis.call('ZSCORE', k.leases, ARGV[1])
redis.call('SET', KEYS[6], 1, 'PX', ARGV[2])
q_leave(k.q, k.w, ARGV[1])
rw_drop(k, ARGV[1])
rw_settle(k, now)
if lease and tonumber(lease) > now then
  return 1
end
return 0
