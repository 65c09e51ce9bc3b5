-- lock_abandon: undo an acquire whose caller stopped waiting for its reply.
-- The acquire may already have run (then delete the lock), or may still be
-- on its way on another connection (then void the token, so it takes
-- nothing when it lands).
-- KEYS as lock_acquire: KEYS[1] lock key, KEYS[2] fence counter (unused),
-- KEYS[3] the token's void mark
-- ARGV[1] token, ARGV[2] lease in ms (a late acquire could hold no longer)
-- reply: 1 if the lock was held and is now free, 0 if the token was voided.
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
redis.call('SET', KEYS[3], 1, 'PX', ARGV[2])
return 0
