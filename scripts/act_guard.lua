-- act_guard: keep v3's key of a shard for a period a hash, so that a v3
-- engine that reads it (v3's IsActive: GETBIT; its mark: SETBIT) fails
-- with WRONGTYPE instead of answering from a bitmap v4 never writes.
-- KEYS[1] v3's bitmap key of the shard for the period
-- ARGV[1] the period's deadline in ms since the epoch (0: none)
-- reply: 1 if made, 0 if it was there.
--
-- v3's own bitmap is never there: the period's index would be v3's (a
-- sorted set), and v4's marks would have failed on it with WRONGTYPE.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'v4', 'activity moved: docs/activity.md')
if ARGV[1] ~= '0' then
  redis.call('PEXPIREAT', KEYS[1], ARGV[1])
end
return 1
