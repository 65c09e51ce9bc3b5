-- recent_add: move an item to the front of a recent list, keep the newest N
-- (the book's add_update_contact, listing 6.1, as one script).
-- KEYS[1] list
-- ARGV[1] item, ARGV[2] capacity N
-- reply: the list's length.
redis.call('LREM', KEYS[1], 0, ARGV[1])
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
return redis.call('LLEN', KEYS[1])
