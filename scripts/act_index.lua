-- act_index: record the partitions that a group's activity for one period
-- uses, and fix the period's deadline at its first mark.
-- KEYS[1] the period's index: a hash of partition -> 1, and 't' -> the
--   period's deadline
-- ARGV[1] the period's lifetime in ms (0: forever), ARGV[2..] partitions
-- reply: the period's deadline in ms since the epoch by this server's clock,
--   0 for none.
--
-- The first call for a period sets the deadline (TIME + lifetime) and the
-- index expires at it; later calls read it and never move it, whatever
-- lifetime they bring. Every key of the period is created with it, so none
-- outlives the index. (v3's index had this name as a sorted set: either
-- version meets the other's with WRONGTYPE.)
local deadline = redis.call('HGET', KEYS[1], 't')
if not deadline then
  deadline = 0
  local ttl = tonumber(ARGV[1])
  if ttl > 0 then
    local now = redis.call('TIME')
    deadline = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl
  end
  deadline = string.format('%.0f', deadline)
  redis.call('HSET', KEYS[1], 't', deadline)
  if deadline ~= '0' then
    redis.call('PEXPIREAT', KEYS[1], deadline)
  end
end
for i = 2, #ARGV do
  redis.call('HSET', KEYS[1], ARGV[i], 1)
end
return tonumber(deadline)
