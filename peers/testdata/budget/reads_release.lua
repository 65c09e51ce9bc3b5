-- reads_release: lock_release's common path's reads, no write
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return 0
end
return redis.call('ZCARD', KEYS[3]) == 0 and 1 or 0
