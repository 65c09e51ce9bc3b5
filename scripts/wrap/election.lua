-- election (wrapper): a lock script run for an election (embed.go's
-- loadObserved). The lock's value is read before the script, and the
-- election's state is published to its observers after it if that value
-- changed (lib/election.lua's el_notify). The lock script, with its
-- libraries, goes in at "-- (script)" as the function el_body; a
-- prologue (election_acquire, election_owner) at "-- (prologue)".
-- KEYS: the lock script's, then the observers (KEYS[#KEYS]): a sorted set
-- wake channel -> registration deadline. ARGV and reply: the lock
-- script's.
-- This header, up to the blank line, is not sent.

-- (libraries)
local function el_body()
-- (script)
end
if redis.call('ZCARD', KEYS[#KEYS]) > 0 then -- the observers' type, before the first write
  redis.call('GET', KEYS[2]) -- and the counter's, which their state reads after it
end
-- (prologue)
local el_before = redis.call('GET', KEYS[1])
local el_reply = el_body()
el_notify(KEYS[1], KEYS[2], KEYS[#KEYS], el_before)
return el_reply
