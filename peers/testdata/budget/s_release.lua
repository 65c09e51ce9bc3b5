-- s_release: design s's release (s_acquire): the holder and its lease
-- checked by the clock, the free value kept for the rest of the key's
-- retention (KEEPTTL).
-- KEYS[1] lock; ARGV[1] token
-- reply: 1 if released, 0 if not held (or flagged)
local v = redis.call('GET', KEYS[1])
local t = ARGV[1]
if not v or string.sub(v, 1, #t + 1) ~= t .. ' ' then return 0 end
local fence, e, flags = string.match(v, '^%S+ (%d+) (%d+)(.*)$')
local c = redis.call('TIME')
if tonumber(e) <= c[1] * 1000 + math.floor(c[2] / 1000) then return 0 end
if flags ~= '' then return 0 end
redis.call('SET', KEYS[1], '- ' .. fence .. ' 0', 'KEEPTTL')
return 1
