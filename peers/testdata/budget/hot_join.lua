-- hot_join: the floor of a waiter's queue join (a design measured, not the
-- library's): the lock read, the entry written, the token queued, with
-- lock_acquire's keys and arguments; no clock, no counter, no abandon mark,
-- no expiry kept.
-- KEYS as lock_acquire's; ARGV as lock_acquire's
-- reply: {1, 1} if the lock was free (taken), {0, -1, 1, 1} if queued
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1] .. ' 1 0', 'PX', ARGV[4])
  return {1, 1}
end
redis.call('HSET', KEYS[4], ARGV[1], '1796661341233000 ' .. ARGV[6])
redis.call('ZADD', KEYS[3], 'NX', 1, ARGV[1])
return {0, -1, 1, 1}
