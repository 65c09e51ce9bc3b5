-- lock: hand a free lock to the first live waiter (shared by lock_release
-- and lock_abandon; needs lib/queue.lua).
-- The waiter's lease runs only to its queue entry's deadline: if it died
-- since its last renewal, the others lose at most that. It extends the
-- lease to its own when it picks the lock up (lock_acquire).
local function lock_handoff(lock, fence_key, q, w)
  if redis.call('ZCARD', q) == 0 then
    return
  end
  local now = now_ms()
  local head, deadline, inbox = q_head(q, w, now)
  if not head then return end
  q_leave(q, w, head)
  local fence = redis.call('INCR', fence_key)
  redis.call('HSET', lock, 'token', head, 'seq', 0, 'fence', fence)
  redis.call('PEXPIRE', lock, deadline - now)
  q_wake(inbox, head, fence, deadline, now)
end

