-- bits_mark: set ids' bits in one shard of a group's bitmap for a period.
-- KEYS[1] the shard's bitmap for the period
-- ARGV[1] the period's deadline in ms since the epoch (0: none), as the
--   period's index gave it; or -1 when the caller did not index the shard
--   just now: then an absent shard is not created
-- ARGV[2..] the ids' bit offsets within the shard
-- reply: -1 if the shard was absent and ARGV[1] is -1 (nothing written),
--   or a set (a bucket: the period started anew, and the shard is not
--   dense in it); else how many of the bits were not set before.
--
-- A shard made anew is made whole at once, its last bit (8,388,095: see
-- activeShardIDs in engine.go) set to 0 first: a string Redis creates is
-- sized exactly, but one that grows gets room for up to twice its length,
-- which random marks would leave behind. It expires at the period's
-- deadline, not later: marks never move it. The first SETBIT type-checks
-- the key before any write.
local fresh = redis.call('EXISTS', KEYS[1]) == 0
if fresh and ARGV[1] == '-1' then
  return -1
end
if fresh then
  redis.call('SETBIT', KEYS[1], 8388095, 0)
end
local n = 0
for i = 2, #ARGV do
  local r = redis.pcall('SETBIT', KEYS[1], ARGV[i], 1)
  if type(r) == 'table' then -- the first: a key of another type, nothing written
    if ARGV[1] == '-1' and type(redis.pcall('SCARD', KEYS[1])) == 'number' then
      return -1
    end
    return r
  end
  n = n + 1 - r
end
if fresh and ARGV[1] ~= '0' then
  redis.call('PEXPIREAT', KEYS[1], ARGV[1])
end
return n
