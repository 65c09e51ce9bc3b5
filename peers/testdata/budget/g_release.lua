-- g_release: design g's fast release (g_acquire): one comparison checks
-- the holder and that nobody waits ("token - "), the free value "- fence"
-- kept for the rest of the lease (KEEPTTL); anything else goes to the full
-- script.
-- KEYS[1] lock; ARGV[1] token
-- reply: 1 if released, 0 if not held or the full script must decide
local v = redis.call('GET', KEYS[1])
local t = ARGV[1]
if not v or string.sub(v, 1, #t + 3) ~= t .. ' - ' then
  return 0
end
redis.call('SET', KEYS[1], '- ' .. string.match(v, '^%S+ %- (%d+)'), 'KEEPTTL')
return 1
