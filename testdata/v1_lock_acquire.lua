-- lock_acquire: take the lock if it is free and give the taker a fence.
-- KEYS[1] lock key, KEYS[2] fence counter (no TTL), KEYS[3] this token's
-- void mark (set by lock_abandon when the caller gave up on this attempt)
-- ARGV[1] token, ARGV[2] lease in ms
-- reply: {1, fence} if taken; {0, holder's PTTL in ms} if held by another;
-- {0, -2} if the caller abandoned this token.
--
-- Every key is read before anything is written, so a key of the wrong type
-- fails the script with nothing changed. The fence is INCRed in the same
-- script as the SET: no taker ever goes without one, even if its client dies right after.
local fence = redis.call('GET', KEYS[2])
if fence and not string.match(fence, '^%d+$') then
  return redis.error_reply('ERR atomicredis: fence key does not hold a counter')
end
if redis.call('GET', KEYS[1]) then
  return {0, redis.call('PTTL', KEYS[1])}
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  return {0, -2}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, redis.call('INCR', KEYS[2])}
