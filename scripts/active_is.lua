-- active_is: whether an id is marked in one period's bitmap.
-- KEYS[1] the period's bitmap
-- ARGV[1] id
-- reply: 1 or 0.
return redis.call('GETBIT', KEYS[1], ARGV[1])
