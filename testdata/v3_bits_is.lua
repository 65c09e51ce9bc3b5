-- bits_is: whether an id is marked in one shard of a period's bitmap.
-- KEYS[1] the shard's bitmap for the period
-- ARGV[1] the id's bit offset within the shard
-- reply: 1 or 0.
return redis.call('GETBIT', KEYS[1], ARGV[1])
