-- lock_extend_many: lock_extend for many locks in one script, on a server
-- that is no cluster (each lock's key has its own name's hash tag, so the
-- keys lie in different slots). One engine's renewal sends it for all its
-- watchdog locks at once; each lock is kept or not as lock_extend would.
-- KEYS[i] lock i ("token fence seq[ owner]": the owner is kept)
-- ARGV[3i-2] its token, ARGV[3i-1] its new lease in ms, ARGV[3i] its
-- extension's sequence number
-- reply: an array with lock_extend's reply for each lock in order: 1
-- extended, 2 held but this extension is older than one applied (nothing
-- changed), 0 no longer held.
local out, wrote = {}, false
for i = 1, #KEYS do
  local r, key, b = 0, KEYS[i], 3 * i
  local v, token = redis.call('GET', key), ARGV[b - 2]
  -- "token fence seq[ owner]", read without a pattern: the token, then
  -- the seq after the second space, up to the third (the owner after it).
  local n = #token
  local at = v and string.sub(v, 1, n + 1) == token .. ' ' and string.find(v, ' ', n + 2, true)
  if at then
    local sp = string.find(v, ' ', at + 1, true)
    local owner = sp and string.sub(v, sp) or ''
    if tonumber(string.sub(v, at + 1, sp and sp - 1 or -1)) >= tonumber(ARGV[b]) then
      r = 2
    else
      -- PEXPIRE first, once: it is not refused at maxmemory, and once a
      -- script has written Redis lets it finish (lock_extend).
      if not wrote then
        redis.call('PEXPIRE', key, ARGV[b - 1])
        wrote = true
      end
      redis.call('SET', key, string.sub(v, 1, at) .. ARGV[b] .. owner, 'PX', ARGV[b - 1])
      r = 1
    end
  end
  out[i] = r
end
return out
