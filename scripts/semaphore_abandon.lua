-- semaphore_abandon: undo an acquire whose caller stopped waiting for its
-- reply. It may have run (then give the permit back) or may still be on its
-- way on another connection (then void the token so it takes nothing).
-- KEYS as semaphore_acquire: KEYS[1] timeouts, KEYS[2] owner, KEYS[3]
-- counter (unused), KEYS[4] limit, KEYS[5] the token's void mark
-- ARGV[1] id, ARGV[2] TTL in ms (a late permit could live no longer)
-- reply: 1 if a permit was given back, 0 if the token was voided.
redis.call('ZCARD', KEYS[2]) -- type check before the first write
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  if redis.call('ZCARD', KEYS[1]) == 0 then
    redis.call('DEL', KEYS[4]) -- the limit goes with the last holder
  end
  return 1
end
redis.call('SET', KEYS[5], 1, 'PX', ARGV[2])
return 0
