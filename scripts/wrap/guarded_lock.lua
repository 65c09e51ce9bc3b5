-- guarded_lock (prologue): a guarded script's check that the lock
-- (KEYS[1], a hash whose holding 'v', lib/lock.lua's value, opens with the
-- holder's token and a space, with "+" in front while the lock is
-- flagged and its lease's end in 'd') is held by the token (ARGV[1]);
-- else it replies the error guarded.go's notHeldReply names, and runs
-- nothing of the body (scripts/wrap/guarded_body.lua follows it).
-- This header, up to the blank line, is not sent.

local v, t = redis.call('HGET', KEYS[1], 'v'), ARGV[1]
if not v or string.sub(v, 1, #t + 1) ~= t .. ' ' then
  local c = v and string.sub(v, 1, #t + 2) == '+' .. t .. ' ' and redis.call('TIME')
  if not c or (tonumber(redis.call('HGET', KEYS[1], 'd')) or 0) <= tonumber(c[1]) * 1000 + math.floor(tonumber(c[2]) / 1000) then
    return redis.error_reply('ATOMICREDIS_NOT_HELD the lock is not held by this token')
  end
end
