-- election_lock_extend_many: v4's lock_extend_many, the string layout elections keep until they move to the plain lock's hash (lib/lock.lua): lock_extend for many locks in one script, on a server
-- that is no cluster (each lock's key has its own name's hash tag, so the
-- keys lie in different slots). One engine's renewal sends it for all its
-- watchdog locks at once; each lock is kept or not as lock_extend would.
-- KEYS[i] lock i (lib/lock.lua's value: what follows the extension
-- number, the owner, is kept)
-- ARGV[1] the new lease in ms, ARGV[2] the extensions' sequence number
-- (the batch's, the same for every lock), ARGV[2+i] lock i's token
-- reply: an array with lock_extend's reply for each lock in order: 1
-- extended, 2 held but this extension is older than one applied (nothing
-- changed), 0 no longer held (gone, another's, or a key of another type).
local lease, seq = ARGV[1], ARGV[2]
local num = tonumber(seq)
-- One MGET reads every lock, 1,000 at a time (unpack's bound): a key of
-- another type reads as none, so it is no longer held and the others are
-- still extended.
local vs = {}
for i = 1, #KEYS, 1000 do
  local part = redis.call('MGET', unpack(KEYS, i, math.min(i + 999, #KEYS)))
  for j = 1, #part do
    vs[i + j - 1] = part[j]
  end
end
local out, wrote = {}, false
for i = 1, #KEYS do
  local r, key, token = 0, KEYS[i], ARGV[i + 2]
  local v = vs[i]
  -- lib/lock.lua's value, read without a pattern: the token, then
  -- the seq after the second space, up to the third (the rest is kept).
  local n = #token
  local at = v and string.sub(v, 1, n + 1) == token .. ' ' and string.find(v, ' ', n + 2, true)
  if at then
    local sp = string.find(v, ' ', at + 1, true)
    local owner = sp and string.sub(v, sp) or ''
    if (tonumber(string.sub(v, at + 1, sp and sp - 1 or -1)) or 0) >= num then -- a number not ours counts as none
      r = 2
    else
      -- PEXPIRE first, once: it is not refused at maxmemory, and once a
      -- script has written Redis lets it finish (lock_extend).
      if not wrote then
        redis.call('PEXPIRE', key, lease)
        wrote = true
      end
      redis.call('SET', key, string.sub(v, 1, at) .. seq .. owner, 'PX', lease)
      r = 1
    end
  end
  out[i] = r
end
return out
