-- rw_owner: store another Owner with the caller's hold of a read-write
-- lock, only if the hold is live; its lease, fence and extension number,
-- and every other hold, stay as they are.
-- KEYS[1] leases, KEYS[2] holds
-- ARGV[1] token, ARGV[2] the new owner ("" for none)
-- reply: 1 if stored, 0 if the caller's hold ran out or is gone.
local now = now_ms()
local lease = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not lease or tonumber(lease) <= now then
  return 0
end
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[2], 'o:' .. ARGV[1])
  return 1
end
-- The first write checks the holds hash's type; the hash lives as long as
-- the longest lease, as rw_expire keeps it.
redis.call('HSET', KEYS[2], 'o:' .. ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], math.max(rw_last({leases = KEYS[1]}) - now, 1))
return 1
