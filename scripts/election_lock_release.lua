-- election_lock_release: v4's lock_release, the string layout elections keep until they move to the plain lock's hash (lib/lock.lua): free the lock only if the caller still holds it, and hand
-- it to the first live waiter, whom it wakes.
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] waiters
-- ARGV[1] token, ARGV[2] fence retention in ms, ARGV[3] wake channel
-- prefix, ARGV[4] the caller's engine id (absent: none)
-- reply: 1 if it was held (and is now free or handed over), 0 if the
-- caller no longer held it; {1, "token fence arrival"} if it was handed
-- to a waiter of the caller's engine, which is not published: the caller
-- wakes its waiter (lib/queue.lua's q_reply).
--
-- With nobody queued (the common case) it reads the lock and the queue's
-- length and deletes the lock; the shared Lua after it is only defined
-- when a waiter may be handed the lock.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return 0
end
local queued = redis.call('ZCARD', KEYS[3])
if queued == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
-- (libraries)
local k = {lock = KEYS[1], fence = KEYS[2], q = KEYS[3], w = KEYS[4]}
local wake = q_waker(ARGV[3], ARGV[4])
local err = lock_unlock(k, ARGV[2], wake, queued)
if err then return err end
return q_reply(1, wake)
