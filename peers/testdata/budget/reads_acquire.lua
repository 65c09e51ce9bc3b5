-- reads_acquire: lock_acquire's common path's reads, no write
-- KEYS as lock_acquire's; ARGV as lock_acquire's
local v = redis.call('GET', KEYS[1])
if not v and redis.call('EXISTS', KEYS[3], KEYS[5]) == 0 then
  return {1, 1}
end
return {0}
