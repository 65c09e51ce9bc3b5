-- lock_pttl: the caller's remaining lease.
-- KEYS[1] the lock's hash (lib/lock.lua)
-- ARGV[1] token
-- reply: the remaining lease in ms if the caller holds the lock, -3 if it
-- does not.
local v, t = redis.call('HGET', KEYS[1], 'v'), ARGV[1]
if not v then
  return -3
end
if string.sub(v, 1, #t + 1) == t .. ' ' then
  return redis.call('PTTL', KEYS[1])
end
if string.sub(v, 1, #t + 2) == '+' .. t .. ' ' then -- flagged: the lease's end is in 'd'
  local c = redis.call('TIME')
  local left = (tonumber(redis.call('HGET', KEYS[1], 'd')) or 0) - (tonumber(c[1]) * 1000 + math.floor(tonumber(c[2]) / 1000))
  if left > 0 then
    return left
  end
end
return -3
