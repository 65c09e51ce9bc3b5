-- lean_release: lock_release without the queue's ZCARD (a design
-- measured: a waiter would mark the lock's value, so a release reads only
-- the lock)
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
