-- semaphore_release: give a permit back, and its slot to the first live
-- waiter, whom it wakes.
-- KEYS[1] timeouts, KEYS[2] owner, KEYS[3] counter, KEYS[4] limit, KEYS[5]
-- queue, KEYS[6] waiters, KEYS[7] owners
-- ARGV[1] id, ARGV[2] fence retention in ms, ARGV[3] wake channel prefix
-- reply: 1 if the permit was held, 0 if it had timed out or was gone (any
-- remnant is removed either way).
local k = {timeouts = KEYS[1], owner = KEYS[2], counter = KEYS[3], limit = KEYS[4], q = KEYS[5], w = KEYS[6],
  owners = KEYS[7]}
-- The owners hash is read always, the waiters hash and the counter only if
-- someone is queued (nothing else here writes them); a stored Owner adds
-- one call, its HDEL.
local st, err = sem_read(k, true, 'waiters+counter')
if err then return err end
local now = now_ms()
local live = sem_drop(k, st, ARGV[1], now)
sem_purge(k, st, now)
sem_settle(k, st, now, ARGV[2], ARGV[3])
if live then
  return 1
end
return 0
