-- s_release_notime: s_release without the clock, so a release after the
-- lease's end is not refused (a rung: what the clock costs there).
-- KEYS[1] lock; ARGV[1] token
-- reply: 1 if released, 0 if not held (or flagged)
local v = redis.call('GET', KEYS[1])
local t = ARGV[1]
if not v or string.sub(v, 1, #t + 1) ~= t .. ' ' then return 0 end
local fence, e, flags = string.match(v, '^%S+ (%d+) (%d+)(.*)$')
if flags ~= '' then return 0 end
redis.call('SET', KEYS[1], '- ' .. fence .. ' 0', 'KEEPTTL')
return 1
