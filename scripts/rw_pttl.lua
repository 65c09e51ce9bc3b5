-- rw_pttl: the remaining lease of the caller's hold of a read-write lock.
-- Writes nothing.
-- KEYS[1] leases
-- ARGV[1] token
-- reply: ms until the hold runs out if it is live, -3 if it is not.
local now = now_ms()
local lease = redis.call('ZSCORE', KEYS[1], ARGV[1])
if lease and tonumber(lease) > now then
  return tonumber(lease) - now
end
return -3
