-- semaphore_holders: purge timed-out permits (their slots go to waiters),
-- then count the live ones.
-- KEYS[1] timeouts, KEYS[2] owner, KEYS[3] counter, KEYS[4] limit, KEYS[5]
-- queue, KEYS[6] waiters
-- ARGV[1] fence retention in ms, ARGV[2] wake channel prefix
-- reply: the number of live permits.
local k = {timeouts = KEYS[1], owner = KEYS[2], counter = KEYS[3], limit = KEYS[4], q = KEYS[5], w = KEYS[6]}
local st, err = sem_read(k)
if err then return err end
local now = now_ms()
sem_purge(k, st, now)
sem_settle(k, st, now, ARGV[1], ARGV[2])
return st.held
