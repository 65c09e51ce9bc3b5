-- suggest: the members of a score-0 sorted set that start with a prefix, in
-- byte order, at most the limit: the book's autocomplete_on_prefix
-- (listing 6.4) whole, in one script, and exact on any bytes.
-- KEYS[1] sorted set
-- ARGV[1] prefix, ARGV[2] limit (>= 1)
-- reply: the matching members.
--
-- Why markers: this is the book's technique, insert a start and an end
-- marker, ZRANK both, ZRANGE between, ZREM them. The book needs WATCH
-- retries and uuid-suffixed markers because other clients run between its
-- round trips; inside one script nothing does, so the markers are exact:
-- start = the prefix itself, end = its byte successor (drop trailing 0xff
-- bytes, add one to the last). Members m with start <= m < end are exactly
-- those beginning with the prefix, whatever bytes they hold (the book's
-- markers 'abb{' and 'abc{' miss names with '{' and anything past 'z').
-- A marker that is already a member is used in place and never removed.
--
-- Cost against ZRANGEBYLEX [start (end LIMIT 0 n: both are O(log N + n),
-- but this one writes (two ZADD, two ZREM when the markers are new), so a
-- query propagates to replicas and the AOF and cannot run on a read-only
-- replica. bench_test.go measures both.
local set, prefix, limit = KEYS[1], ARGV[1], tonumber(ARGV[2])
if prefix == '' then
  return redis.call('ZRANGE', set, 0, limit - 1)
end
local stop = prefix
while #stop > 0 and string.byte(stop, #stop) == 255 do
  stop = string.sub(stop, 1, #stop - 1)
end
if #stop > 0 then
  stop = string.sub(stop, 1, #stop - 1) .. string.char(string.byte(stop, #stop) + 1)
end

local addedStart = redis.call('ZADD', set, 'NX', 0, prefix)
local from = redis.call('ZRANK', set, prefix) + addedStart
local to, addedStop
if stop == '' then -- prefix is all 0xff bytes: no end marker, run to the end
  addedStop = 0
  to = redis.call('ZCARD', set) - 1
else
  addedStop = redis.call('ZADD', set, 'NX', 0, stop)
  to = redis.call('ZRANK', set, stop) - 1
end
to = math.min(to, from + limit - 1)
local out = {}
if to >= from then
  out = redis.call('ZRANGE', set, from, to)
end
if addedStart == 1 then redis.call('ZREM', set, prefix) end
if addedStop == 1 then redis.call('ZREM', set, stop) end
return out
