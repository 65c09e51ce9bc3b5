-- lease_acquire: the reads, and the lease's SET: no fence
local v = redis.call('GET', KEYS[1])
if not v and redis.call('EXISTS', KEYS[3], KEYS[5]) == 0 then
  redis.call('SET', KEYS[1], ARGV[1] .. ' 1 0', 'PX', ARGV[4])
  return {1, 1}
end
return {0}
