-- semaphore_info: the stored limit, the live permits and the live waiters
-- of a semaphore, and the first live permits (those that time out first)
-- with their counters and Owners. Writes nothing.
-- KEYS[1] timeouts, KEYS[2] limit, KEYS[3] waiters, KEYS[4] owner, KEYS[5]
-- owners
-- ARGV[1] how many permits to list at most
-- reply: {stored limit (0: none), live permits, live waiters, then for
-- each permit listed: its id, ms until it times out, its counter, its
-- Owner ("" if none)}.
local now = now_ms()
local limit = tonumber(redis.call('GET', KEYS[2])) or 0
local out = {limit, redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf'), q_live(KEYS[3], now)}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, ARGV[1])
-- (HGET, not HMGET: the commands the README's ACL grants)
local named = #live > 0 and redis.call('EXISTS', KEYS[5]) == 1
for i = 1, #live, 2 do
  local id = live[i]
  out[#out + 1] = id
  out[#out + 1] = tonumber(live[i + 1]) - now
  out[#out + 1] = redis.call('ZSCORE', KEYS[4], id) or '0'
  out[#out + 1] = named and redis.call('HGET', KEYS[5], id) or ''
end
return out
