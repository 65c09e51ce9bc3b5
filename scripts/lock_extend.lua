-- lock_extend: give the caller's lock a new lease, only if it still holds it
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
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local token, fence, seq, owner = string.match(v, '^(%S+) (%d+) (%d+)(.*)$')
if token ~= ARGV[1] then
  return 0
end
if tonumber(seq) >= tonumber(ARGV[3]) then
  return 2
end
-- PEXPIRE first: it is not refused at maxmemory, and once a script has
-- written Redis lets it finish, so a holder can extend under noeviction.
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SET', KEYS[1], token .. ' ' .. fence .. ' ' .. ARGV[3] .. owner, 'PX', ARGV[2])
return 1
