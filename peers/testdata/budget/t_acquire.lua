-- t_acquire: a design measured, not the library's: lock_acquire's common
-- path (the same calls) with only the lock's key and two arguments
-- passed, the other keys built in the script (principle 3 forbids it),
-- and the fence as the reply (no table).
-- KEYS[1] lock; ARGV[1] token, ARGV[2] lease in ms, ARGV[3] fence
-- retention in ms
-- reply: the fence if taken, 0 if not
local token = ARGV[1]
local v = redis.call('GET', KEYS[1])
if not v and redis.call('EXISTS', KEYS[1] .. ':queue', KEYS[1] .. ':void:' .. token) == 0 then
  local fk = KEYS[1] .. ':fence'
  local f = redis.call('INCR', fk)
  if f == 1 then
    local t = redis.call('TIME')
    f = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('SET', fk, string.format('%.0f', f), 'PX', ARGV[3])
  else
    redis.call('PEXPIRE', fk, ARGV[3])
  end
  redis.call('SET', KEYS[1], token .. ' ' .. string.format('%.0f', f) .. ' 0', 'PX', ARGV[2])
  return f
end
return 0
