-- semaphore_limit: store a semaphore's limit (an administrator's call): it
-- stays while the semaphore is idle, until the fence retention. Raising it
-- hands the new slots to queued waiters at once, whom it wakes; lowering
-- it admits nobody until the holders are under it.
-- KEYS[1] timeouts, KEYS[2] owner, KEYS[3] counter, KEYS[4] limit, KEYS[5]
-- queue, KEYS[6] waiters, KEYS[7] owners
-- ARGV[1] limit (>= 1), ARGV[2] fence retention in ms, ARGV[3] wake
-- channel prefix
-- reply: the number of live permits.
local k = {timeouts = KEYS[1], owner = KEYS[2], counter = KEYS[3], limit = KEYS[4], q = KEYS[5], w = KEYS[6],
  owners = KEYS[7]}
local st, err = sem_read(k)
if err then return err end
local now = now_ms()
redis.call('SET', k.limit, ARGV[1], 'PX', ARGV[2])
st.limit, st.admin = tonumber(ARGV[1]), true
sem_purge(k, st, now)
sem_settle(k, st, now, ARGV[2], ARGV[3])
return st.held
