-- lock_owner: store another Owner with the caller's lock, only if it still
-- holds it; the lease and the extension number stay as they are.
-- KEYS[1] lock ("token fence seq[ owner]")
-- ARGV[1] token, ARGV[2] the new owner ("" for none)
-- reply: 1 if stored, 0 if the caller no longer holds the lock.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local token, rest = string.match(v, '^(%S+) (%d+ %d+)')
if token ~= ARGV[1] then
  return 0
end
if ARGV[2] ~= '' then
  rest = rest .. ' ' .. ARGV[2]
end
redis.call('SET', KEYS[1], token .. ' ' .. rest, 'KEEPTTL')
return 1
