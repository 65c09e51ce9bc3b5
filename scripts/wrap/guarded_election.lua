-- guarded_election (prologue): a guarded script's check that an
-- election's lock (v4's string layout, scripts/election_lock_*.lua)
-- (KEYS[1], whose value, lib/lock.lua's, opens with the holder's token and
-- a space) is held by the token (ARGV[1]);
-- else it replies the error guarded.go's notHeldReply names, and runs
-- nothing of the body (scripts/wrap/guarded_body.lua follows it).
-- This header, up to the blank line, is not sent.

local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return redis.error_reply('ATOMICREDIS_NOT_HELD the lock is not held by this token')
end
