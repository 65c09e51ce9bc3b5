-- hpg_release: design hpg's release (hpg_acquire): one comparison checks
-- the holder and that nobody waits ("token - "), the free value written
-- (the hash keeps its PX: the rest of the lease).
-- KEYS[1] the name's hash; ARGV[1] token
-- reply: 1 if released, 0 if not held (or flagged: the slow path)
local v = redis.call('HGET', KEYS[1], 'v')
local t = ARGV[1]
if not v or string.sub(v, 1, #t + 3) ~= t .. ' - ' then
  return 0
end
redis.call('HSET', KEYS[1], 'v', '- ' .. string.match(v, '^%S+ %- (%d+)'))
return 1
