-- semaphore_info: the stored limit, the live permits and the live waiters
-- of a semaphore. Writes nothing.
-- KEYS[1] timeouts, KEYS[2] limit, KEYS[3] waiters
-- reply: {stored limit (0: none), live permits, live waiters}.
local now = now_ms()
local limit = tonumber(redis.call('GET', KEYS[2])) or 0
return {limit, redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf'), q_live(KEYS[3], now)}
