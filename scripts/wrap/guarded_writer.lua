-- guarded_writer (prologue): a guarded script's check that a read-write
-- lock's writer, the token (ARGV[1]), is a member of the leases (KEYS[1])
-- with a deadline past the server's clock; else it replies the error
-- guarded.go's notHeldReply names, and runs nothing of the body.
-- This header, up to the blank line, is not sent.

local d = redis.call('ZSCORE', KEYS[1], ARGV[1])
local t = redis.call('TIME')
if not d or tonumber(d) <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
  return redis.error_reply('ATOMICREDIS_NOT_HELD the lock is not held by this token')
end
