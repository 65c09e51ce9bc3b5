-- semaphore_extend_many: semaphore_extend for many live permits in one
-- script, on a server that is no cluster (each semaphore's keys have their
-- own name's hash tag). It only extends: a permit it finds timed out or
-- gone it leaves alone and reports, and the caller then runs
-- semaphore_extend for it, which removes its remnants and hands its slot
-- on.
-- KEYS[3i-2] permit i's timeouts, KEYS[3i-1] its owner set, KEYS[3i] its
-- extension number (semaphore_extend's KEYS[8])
-- ARGV[3i-2] its id, ARGV[3i-1] its new TTL in ms, ARGV[3i] its
-- extension's sequence number
-- reply: an array, for each permit in order: 1 extended, 2 live but this
-- extension is older than one applied (nothing changed), 0 timed out or
-- gone (nothing changed).
local now = now_ms()
local out = {}
for i = 1, #KEYS / 3 do
  local b, r = 3 * i, 0
  local id = ARGV[b - 2]
  local deadline = redis.call('ZSCORE', KEYS[b - 2], id)
  if deadline and tonumber(deadline) > now and redis.call('ZSCORE', KEYS[b - 1], id) then
    if tonumber(redis.call('GET', KEYS[b]) or 0) >= tonumber(ARGV[b]) then
      r = 2
    else
      redis.call('ZADD', KEYS[b - 2], now + tonumber(ARGV[b - 1]), id)
      redis.call('SET', KEYS[b], ARGV[b], 'PX', ARGV[b - 1])
      r = 1
    end
  end
  out[i] = r
end
return out
