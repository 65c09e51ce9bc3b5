-- semaphore_info: the stored limit, the live permits, the live waiters and
-- the weight the live permits hold, and the first live permits (those that
-- time out first) with their counters, Owners and weights. Writes nothing.
-- KEYS[1] timeouts, KEYS[2] limit, KEYS[3] waiters, KEYS[4] owner, KEYS[5]
-- owners
-- ARGV[1] how many permits to list at most
-- reply: {stored limit (0: none), live permits, live waiters, weight they
-- hold, then for each permit listed: its id, ms until it times out, its
-- counter, its Owner ("" if none), its weight}.
local now = now_ms()
local raw = redis.call('GET', KEYS[2])
local limit, extra = string.match(raw or '', '^(%d+) ?(%d*)$')
limit, extra = limit and tonumber(limit) or 0, extra and tonumber(extra) or 0
local held = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
local out = {limit, held, q_live(KEYS[3], now), held}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, ARGV[1])
-- (HGET, not HMGET: the commands the README's ACL grants)
local named = #live > 0 and redis.call('EXISTS', KEYS[5]) == 1
-- Weights are read only when the stored limit says some are held (or is
-- gone while permits are), from the owners hash's 'w:' fields.
local weights = {}
if named and (extra > 0 or not raw) then
  local all = redis.call('HGETALL', KEYS[5])
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 2) == 'w:' then
      local id, w = string.sub(all[i], 3), tonumber(all[i + 1])
      local deadline = redis.call('ZSCORE', KEYS[1], id)
      if deadline and tonumber(deadline) > now then
        weights[id] = w
        out[4] = out[4] + w - 1
      end
    end
  end
end
for i = 1, #live, 2 do
  local id = live[i]
  out[#out + 1] = id
  out[#out + 1] = tonumber(live[i + 1]) - now
  out[#out + 1] = redis.call('ZSCORE', KEYS[4], id) or '0'
  out[#out + 1] = named and redis.call('HGET', KEYS[5], id) or ''
  out[#out + 1] = weights[id] or 1
end
return out
