-- s_acquire: a design measured, not the library's: one string key a
-- name, the lease's end in its value ("token fence end", "- fence 0" when
-- free) and flags after it (a waiter queued, an abandon mark: the slow
-- path), so that the key can outlive the lease and carry them; the clock
-- read to decide the lease. The key is kept for the fence's retention.
-- KEYS[1] lock; ARGV[1] token, ARGV[2] lease in ms, ARGV[3] retention in ms
-- reply: the fence if taken, 0 if not (or flagged)
local v = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local f
if v then
  local tok, fence, e, flags = string.match(v, '^(%S+) (%d+) (%d+)(.*)$')
  if flags ~= '' then return 0 end
  if tok ~= '-' and tonumber(e) > now then return 0 end
  f = tonumber(fence) + 1
else
  f = t[1] * 1000000 + t[2]
end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. string.format('%d', f) .. ' ' .. string.format('%d', now + ARGV[2]), 'PX', ARGV[3])
return f
