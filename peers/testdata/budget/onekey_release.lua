-- onekey_release: onekey_acquire's release (a design measured): the
-- holder's fields dropped, the fence kept, and no queue to read (a
-- waiter would mark the value)
local v = redis.call('GET', KEYS[1])
local f, holder = string.match(v or '', '^(%d+) (%S+)')
if holder ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], f, 'KEEPTTL')
return 1
