-- semaphore_limit: store a semaphore's limit (an administrator's call): it
-- stays while the semaphore is idle, until the fence retention. Raising it
-- hands the new slots to queued waiters at once, whom it wakes; lowering
-- it admits nobody until the holders are under it, and refuses every
-- waiter whose weight is now above it (each leaves the queue and is woken
-- to look again, when its acquire script tells it why).
-- KEYS[1] timeouts, KEYS[2] owner, KEYS[3] counter, KEYS[4] limit, KEYS[5]
-- queue, KEYS[6] waiters, KEYS[7] owners
-- ARGV[1] limit (>= 1), ARGV[2] fence retention in ms, ARGV[3] wake
-- channel prefix
-- reply: the weight the live permits hold (their number when all weigh 1).
local k = {timeouts = KEYS[1], owner = KEYS[2], counter = KEYS[3], limit = KEYS[4], q = KEYS[5], w = KEYS[6],
  owners = KEYS[7]}
local st, err = sem_read(k)
if err then return err end
redis.call('ZCARD', k.timeouts) -- its type, before the first write
local now, limit = now_ms(), tonumber(ARGV[1])
if st.queued > 0 and st.limit and limit < st.limit then
  local entries = redis.call('HGETALL', k.w)
  for i = 1, #entries, 2 do
    local weight = string.match(entries[i + 1], '^%d+w(%d+) ')
    if weight and tonumber(weight) > limit then
      local arrival = redis.call('ZSCORE', k.q, entries[i])
      q_leave(k.q, k.w, entries[i])
      if arrival then
        q_wake(ARGV[3], string.match(entries[i + 1], '^%S+ (%S+)'), entries[i], 0, tonumber(arrival))
      end
    end
  end
end
st.limit, st.admin, st.ttl = limit, true, tonumber(ARGV[2])
redis.call('SET', k.limit, st.extra > 0 and fmt(limit) .. ' ' .. fmt(st.extra) or fmt(limit), 'PX', ARGV[2])
sem_purge(k, st, now)
sem_settle(k, st, now, ARGV[2], ARGV[3])
return st.held
