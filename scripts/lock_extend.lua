-- lock_extend: give the caller's lock a new lease, only if it still holds it
-- and no later extension of its own has landed first. It also confirms a
-- lock handed over to a waiter, whose lease ran only to the end of its
-- queue entry.
-- KEYS[1] the lock's hash (lib/lock.lua: its holding 'v' is the lock's
-- value, "+" in front while flagged; what follows the extension number,
-- the owner, is kept)
-- ARGV[1] token, ARGV[2] new lease in ms, ARGV[3] the extension's sequence
-- number (the holder numbers its extensions 1, 2, 3, ... as it sends them)
-- reply: 1 if extended; 2 if held but this extension is older than one
-- already applied (it changes nothing); 0 if the caller no longer holds
-- the lock.
--
-- The sequence is what lets Extend win against a watchdog extension sent
-- before it but delayed in the network: whichever lands last, the server
-- keeps the lease of the extension sent last.
local v, token = redis.call('HGET', KEYS[1], 'v'), ARGV[1]
if not v then
  return 0
end
-- lib/lock.lua's value, read without a pattern as lock_extend_many reads
-- it: the token and a space, then the extension number after the second
-- space, up to the third (the rest, the owner, is kept).
local flag = string.byte(v, 1) == 43 and '+' or ''
local n = #token + #flag
local at = string.sub(v, 1, n + 1) == flag .. token .. ' ' and string.find(v, ' ', n + 2, true)
if not at then
  return 0
end
local now
if flag ~= '' then -- flagged: the lease's end is in 'd', decided by the clock
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if (tonumber(redis.call('HGET', KEYS[1], 'd')) or 0) <= now then
    return 0
  end
end
local sp = string.find(v, ' ', at + 1, true)
if (tonumber(string.sub(v, at + 1, sp and sp - 1 or -1)) or 0) >= tonumber(ARGV[3]) then -- a number not ours counts as none
  return 2
end
v = string.sub(v, 1, at) .. ARGV[3] .. (sp and string.sub(v, sp) or '')
if not now then
  -- PEXPIRE first: it is not refused at maxmemory, and once a script has
  -- written Redis lets it finish, so a holder can extend under noeviction.
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('HSET', KEYS[1], 'v', v)
  return 1
end
local d = now + tonumber(ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then -- kept to the latest deadline in it
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local ds = string.format('%d%09d', math.floor(d / 1e9), d % 1e9) -- lib/queue.lua's fmt (d is a server ms, past 10^9)
-- At maxmemory a first write that may grow memory is refused (when the
-- PEXPIRE above was not needed): deleting 'd' first, a write Redis allows
-- there, lets the HSET run (lib/lock.lua's lk_hset).
if type(redis.pcall('HSET', KEYS[1], 'v', v, 'd', ds)) == 'table' then
  redis.call('HDEL', KEYS[1], 'd')
  redis.call('HSET', KEYS[1], 'v', v, 'd', ds)
end
return 1
