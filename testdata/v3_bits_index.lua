-- bits_index: record the shards that a group's bitmap for one period uses,
-- and fix the period's deadline at its first mark.
-- KEYS[1] the period's index: a sorted set of shard number -> the period's
--   deadline (every member carries the same one)
-- ARGV[1] the period's lifetime in ms (0: forever), ARGV[2..] shard numbers
-- reply: the period's deadline in ms since the epoch by this server's clock,
--   0 for none.
--
-- The first call for a period sets the deadline (TIME + lifetime) and the
-- index expires at it; later calls read it and never move it, whatever
-- lifetime they bring. Every shard of the period is created with it, so
-- no shard outlives the index.
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local deadline = tonumber(first[2])
if not deadline then
  deadline = 0
  local ttl = tonumber(ARGV[1])
  if ttl > 0 then
    local now = redis.call('TIME')
    deadline = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl
  end
end
local score = string.format('%.0f', deadline)
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'NX', score, ARGV[i])
end
if not first[2] and deadline > 0 then
  redis.call('PEXPIREAT', KEYS[1], score)
end
return deadline
