-- bits_merge: set many ids' bits in one shard of a group's bitmap for a
-- period at once, by OR-ing in a run of bytes (MarkActiveMany's way for a
-- dense batch: one BITOP instead of a SETBIT an id).
-- KEYS[1] the shard's bitmap for the period, KEYS[2] a scratch key (the
--   shard's hash tag)
-- ARGV[1] the period's deadline, or -1, as for bits_mark
-- ARGV[2] the byte where the run starts, ARGV[3] the run (bit 7 of its
--   first byte is bit ARGV[2] * 8 of the shard)
-- reply: -1 if the shard was absent, or a set, and ARGV[1] is -1, as for
--   bits_mark (nothing written); else 0.
--
-- An absent shard is made whole and written with SETRANGE, and expires at
-- the period's deadline, as with bits_mark; an existing one is
-- type-checked (STRLEN) before the first write.
local fresh = redis.call('EXISTS', KEYS[1]) == 0
if fresh and ARGV[1] == '-1' then
  return -1
end
if fresh then -- nothing to OR with; made whole first, as in bits_mark
  redis.call('SETBIT', KEYS[1], 8388095, 0)
  redis.call('SETRANGE', KEYS[1], ARGV[2], ARGV[3])
  if ARGV[1] ~= '0' then
    redis.call('PEXPIREAT', KEYS[1], ARGV[1])
  end
  return 0
end
local len = redis.pcall('STRLEN', KEYS[1])
if type(len) == 'table' then -- a key of another type
  if ARGV[1] == '-1' and type(redis.pcall('SCARD', KEYS[1])) == 'number' then
    return -1
  end
  return len
end
redis.call('DEL', KEYS[2])
redis.call('SETRANGE', KEYS[2], ARGV[2], ARGV[3])
redis.call('BITOP', 'OR', KEYS[1], KEYS[1], KEYS[2])
redis.call('DEL', KEYS[2])
return 0
