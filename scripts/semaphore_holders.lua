-- semaphore_holders: count the live permits of a semaphore. Writes
-- nothing: permits past their deadline are not counted, and are purged
-- (their slots handed to waiters) by the next acquisition, release or
-- extension.
-- KEYS[1] timeouts, KEYS[2] owner
-- reply: the number of live permits.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZCARD', KEYS[2]) -- an owner key of the wrong type is an error, not a count
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
