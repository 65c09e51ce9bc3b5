-- h_acquire: a design measured, not the library's: one hash a name,
-- every key of it in one (principle 3 with one key): v the holding
-- ("token fence end", "- fence 0" when free), q the queue's length,
-- x:<token> an abandon mark, the queue's entries (h_join); the clock read
-- to decide the lease; the hash kept for the fence's retention.
-- KEYS[1] the name's hash; ARGV[1] token, ARGV[2] lease in ms, ARGV[3]
-- retention in ms
-- reply: the fence if taken, 0 if not
local s = redis.call('HMGET', KEYS[1], 'v', 'q', 'x:' .. ARGV[1])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local f
local v = s[1]
if v then
  local tok, fence, e = string.match(v, '^(%S+) (%d+) (%d+)')
  if tok ~= '-' and tonumber(e) > now then return 0 end
  f = tonumber(fence) + 1
else
  f = t[1] * 1000000 + t[2]
end
if s[2] or s[3] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[1] .. ' ' .. string.format('%d', f) .. ' ' .. string.format('%d', now + ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return f
