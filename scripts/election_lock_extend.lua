-- election_lock_extend: v4's lock_extend, the string layout elections keep until they move to the plain lock's hash (lib/lock.lua): give the caller's lock a new lease, only if it still holds it
-- and no later extension of its own has landed first. It also confirms a
-- lock handed over to a waiter, whose lease ran only to the end of its
-- queue entry.
-- KEYS[1] lock (lib/lock.lua's value: what follows the extension number,
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
local v, token = redis.call('GET', KEYS[1]), ARGV[1]
-- lib/lock.lua's value, read without a pattern as lock_extend_many reads
-- it: the token and a space, then the extension number after the second
-- space, up to the third (the rest, the owner, is kept).
local n = #token
local at = v and string.sub(v, 1, n + 1) == token .. ' ' and string.find(v, ' ', n + 2, true)
if not at then
  return 0
end
local sp = string.find(v, ' ', at + 1, true)
if (tonumber(string.sub(v, at + 1, sp and sp - 1 or -1)) or 0) >= tonumber(ARGV[3]) then -- a number not ours counts as none
  return 2
end
-- PEXPIRE first: it is not refused at maxmemory, and once a script has
-- written Redis lets it finish, so a holder can extend under noeviction.
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SET', KEYS[1], string.sub(v, 1, at) .. ARGV[3] .. (sp and string.sub(v, sp) or ''), 'PX', ARGV[2])
return 1
