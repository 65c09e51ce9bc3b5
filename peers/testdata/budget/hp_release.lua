-- hp_release: design hp's release (hp_acquire): the holder checked, its
-- holding unflagged, the free value written (the hash keeps its PX: the
-- rest of the lease).
-- KEYS[1] the name's hash; ARGV[1] token
-- reply: 1 if released, 0 if not held (or flagged: the slow path)
local v = redis.call('HGET', KEYS[1], 'v')
local t = ARGV[1]
if not v or string.sub(v, 1, #t + 1) ~= t .. ' ' then
  return 0
end
local e = string.find(v, ' ', #t + 2, true)
if string.find(v, ' ', e + 1, true) then
  return 0
end
redis.call('HSET', KEYS[1], 'v', '- ' .. string.sub(v, #t + 2, e - 1))
return 1
