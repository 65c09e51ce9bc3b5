-- lease_release: lock_release's common path
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return 0
end
if redis.call('ZCARD', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
