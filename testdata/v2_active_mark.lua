-- active_mark: mark an id active in one period's bitmap.
-- KEYS[1] the period's bitmap
-- ARGV[1] id, 0 <= id < 2^32
-- reply: the bit's previous value.
return redis.call('SETBIT', KEYS[1], ARGV[1], 1)
