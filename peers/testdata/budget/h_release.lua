-- h_release: design h's release (h_acquire): the holder and its lease
-- checked by the clock, the free value written (the fence kept).
-- KEYS[1] the name's hash; ARGV[1] token
-- reply: 1 if released, 0 if not held (or someone queued)
local s = redis.call('HMGET', KEYS[1], 'v', 'q')
local v, t = s[1], ARGV[1]
if not v or string.sub(v, 1, #t + 1) ~= t .. ' ' then return 0 end
local fence, e = string.match(v, '^%S+ (%d+) (%d+)')
local c = redis.call('TIME')
if tonumber(e) <= c[1] * 1000 + math.floor(c[2] / 1000) then return 0 end
if s[2] then return 0 end
redis.call('HSET', KEYS[1], 'v', '- ' .. fence .. ' 0')
return 1
