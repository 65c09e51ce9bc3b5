-- recent_remove: take an item out of a recent list (remove_contact).
-- KEYS[1] list
-- ARGV[1] item
-- reply: how many copies were removed.
return redis.call('LREM', KEYS[1], 0, ARGV[1])
