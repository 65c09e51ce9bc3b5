-- lock_extend_many: lock_extend for many locks in one script, on a server
-- that is no cluster (each lock's key has its own name's hash tag, so the
-- keys lie in different slots). One engine's renewal sends it for all its
-- watchdog locks at once; each lock is kept or not as lock_extend would.
-- KEYS[i] lock i's hash (lib/lock.lua: its holding 'v' is the lock's
-- value, "+" in front while flagged; what follows the extension number,
-- the owner, is kept)
-- ARGV[1] the new lease in ms, ARGV[2] the extensions' sequence number
-- (the batch's, the same for every lock), ARGV[2+i] lock i's token
-- reply: an array with lock_extend's reply for each lock in order: 1
-- extended, 2 held but this extension is older than one applied (nothing
-- changed), 0 no longer held (gone, another's, or a key of another type).
local lease, seq = ARGV[1], ARGV[2]
local num, ms = tonumber(seq), tonumber(ARGV[1])
local now = nil
local out, wrote = {}, false
for i = 1, #KEYS do
  local r, key, token = 0, KEYS[i], ARGV[i + 2]
  -- A key of another type reads as none: no longer held, and the others
  -- are still extended.
  local ok, v = pcall(redis.call, 'HGET', key, 'v')
  if not ok then
    v = nil
  end
  -- lib/lock.lua's value, read without a pattern: the token, then
  -- the seq after the second space, up to the third (the rest is kept).
  local flag = v and string.byte(v, 1) == 43 and '+' or ''
  local n = #token + #flag
  local at = v and string.sub(v, 1, n + 1) == flag .. token .. ' ' and string.find(v, ' ', n + 2, true)
  if at and flag ~= '' then -- flagged: the lease's end is in 'd', decided by the clock
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    if (tonumber(redis.call('HGET', key, 'd')) or 0) <= now then
      at = nil
    end
  end
  if at then
    local sp = string.find(v, ' ', at + 1, true)
    local owner = sp and string.sub(v, sp) or ''
    if (tonumber(string.sub(v, at + 1, sp and sp - 1 or -1)) or 0) >= num then -- a number not ours counts as none
      r = 2
    else
      -- PEXPIRE first, once: it is not refused at maxmemory, and once a
      -- script has written Redis lets it finish (lock_extend).
      if flag == '' then
        redis.call('PEXPIRE', key, lease)
        redis.call('HSET', key, 'v', string.sub(v, 1, at) .. seq .. owner)
      else
        if redis.call('PTTL', key) < ms then
          redis.call('PEXPIRE', key, lease)
        end
        local value, ds = string.sub(v, 1, at) .. seq .. owner, string.format('%d%09d', math.floor((now + ms) / 1e9), (now + ms) % 1e9)
        -- refused at maxmemory as a first write: 'd' deleted first (lock_extend)
        if type(redis.pcall('HSET', key, 'v', value, 'd', ds)) == 'table' then
          redis.call('HDEL', key, 'd')
          redis.call('HSET', key, 'v', value, 'd', ds)
        end
      end
      r = 1
    end
  end
  out[i] = r
end
return out
