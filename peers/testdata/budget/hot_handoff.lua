-- hot_handoff: the floor of a handoff (a design measured, not the
-- library's): the holder checked, the head read and dequeued, the lock
-- given to it, with lock_release's keys and arguments; no clock, no
-- counter, no wake-up.
-- KEYS as lock_release's; ARGV as lock_release's
-- reply: 1 if it was held, 0 if not
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return 0
end
local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
if not head then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('HGET', KEYS[4], head)
redis.call('ZREM', KEYS[3], head)
redis.call('HDEL', KEYS[4], head)
redis.call('SET', KEYS[1], head .. ' 2 0', 'PX', 1000)
return 1
