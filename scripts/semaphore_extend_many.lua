-- semaphore_extend_many: semaphore_extend for many live permits in one
-- script, on a server that is no cluster (each semaphore's keys have their
-- own name's hash tag). It only extends: a permit it finds timed out or
-- gone it leaves alone and reports, and the caller then runs
-- semaphore_extend for it, which removes its remnants and hands its slot
-- on.
-- KEYS[3i-2] permit i's timeouts, KEYS[3i-1] its owner set, KEYS[3i] its
-- extension number (semaphore_extend's KEYS[8])
-- ARGV[1] the new TTL in ms, ARGV[2] the extensions' sequence number (the
-- batch's, the same for every permit), ARGV[2+i] permit i's id
-- reply: an array, for each permit in order: 1 extended, 2 live but this
-- extension is older than one applied (nothing changed), 0 timed out,
-- gone or a key of another type (nothing changed).
local now = now_ms()
local ttl, seq = tonumber(ARGV[1]), ARGV[2]
local num = tonumber(seq)
return batch_each(#KEYS / 3, function(i)
  local b, id = 3 * i, ARGV[i + 2]
  local deadline = redis.call('ZSCORE', KEYS[b - 2], id)
  if not deadline or tonumber(deadline) <= now or not redis.call('ZSCORE', KEYS[b - 1], id) then
    return 0
  end
  if (tonumber(redis.call('GET', KEYS[b])) or 0) >= num then -- a number not ours counts as none
    return 2
  end
  redis.call('PEXPIRE', KEYS[b], ARGV[1]) -- first: at maxmemory, as semaphore_extend
  redis.call('ZADD', KEYS[b - 2], now + ttl, id)
  redis.call('SET', KEYS[b], seq, 'PX', ARGV[1])
  return 1
end)
