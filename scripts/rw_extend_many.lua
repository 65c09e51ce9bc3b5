-- rw_extend_many: rw_extend for many holds of read-write locks in one
-- script, on a server that is no cluster (each lock's keys have their own
-- name's hash tag). Each hold is kept or not as rw_extend would.
-- KEYS[2i-1] hold i's leases, KEYS[2i] its holds
-- ARGV[1] the new lease in ms, ARGV[2] the extensions' sequence number
-- (the batch's, the same for every hold), ARGV[2+i] hold i's token
-- reply: an array with rw_extend's reply for each hold in order: 1
-- extended, 2 live but this extension is older than one applied (nothing
-- changed), 0 ran out or gone (or a key of another type).
local now = now_ms()
local ttl, seq = tonumber(ARGV[1]), ARGV[2]
local num = tonumber(seq)
return batch_each(#KEYS / 2, function(i)
  local k = {leases = KEYS[2 * i - 1], holds = KEYS[2 * i]}
  local token = ARGV[i + 2]
  local lease = redis.call('ZSCORE', k.leases, token)
  if not lease or tonumber(lease) <= now then
    return 0
  end
  if (tonumber(redis.call('HGET', k.holds, token)) or 0) >= num then -- a number not ours counts as none
    return 2
  end
  -- PEXPIRE first (rw_extend); the keys live as long as the longest
  -- lease, this one's old or new.
  local deadline = now + ttl
  local ms = math.max(rw_last(k), deadline) - now
  redis.call('PEXPIRE', k.leases, ms)
  redis.call('PEXPIRE', k.holds, ms)
  redis.call('ZADD', k.leases, deadline, token)
  redis.call('HSET', k.holds, token, seq)
  redis.call('PEXPIRE', k.holds, ms) -- the HSET may have made the hash (rw_extend)
  return 1
end)
