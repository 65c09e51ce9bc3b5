-- f_release: design f's fast release (f_acquire): the holder checked, its
-- value unflagged ("token fence seq", nothing after), the free value "-
-- fence" kept for the rest of the lease (KEEPTTL); a flagged value (a
-- waiter to hand the lock to) goes to the full script.
-- KEYS[1] lock; ARGV[1] token
-- reply: 1 if released, 0 if not held or the full script must decide
local v = redis.call('GET', KEYS[1])
local t = ARGV[1]
if not v or string.sub(v, 1, #t + 1) ~= t .. ' ' then
  return 0
end
local e = string.find(v, ' ', #t + 2, true)
if string.find(v, ' ', e + 1, true) then
  return 0
end
redis.call('SET', KEYS[1], '- ' .. string.sub(v, #t + 2, e - 1), 'KEEPTTL')
return 1
