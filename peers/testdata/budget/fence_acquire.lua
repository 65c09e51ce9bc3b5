-- fence_acquire: the reads, the counter's INCR and the lease's SET: no
-- retention for the counter
local v = redis.call('GET', KEYS[1])
if not v and redis.call('EXISTS', KEYS[3], KEYS[5]) == 0 then
  local f = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. string.format('%.0f', f) .. ' 0', 'PX', ARGV[4])
  return {1, f}
end
return {0}
