-- lock_release: free the lock only if the caller still holds it, and hand
-- it to the first live waiter, whom it wakes.
-- KEYS[1] the lock's hash (lib/lock.lua)
-- ARGV[1] token, ARGV[2] wake channel prefix, ARGV[3] the caller's engine
-- id (absent: none)
-- reply: 1 if it was held (and is now free or handed over), 0 if the
-- caller no longer held it; {1, "token fence arrival"} if it was handed
-- to a waiter of the caller's engine, which is not published: the caller
-- wakes its waiter (lib/queue.lua's q_reply).
--
-- Unflagged (nobody queued, no abandon mark: the common case) the holding
-- opens with the caller's token and a space, and the free value "- fence"
-- is written in its place: the hash keeps its PX, the rest of the lease
-- (at maxmemory, where that write is refused, the hash is deleted).
-- The shared Lua after it is only defined for a flagged lock.
local v = redis.call('HGET', KEYS[1], 'v')
local t = ARGV[1]
if not v then
  return 0
end
if string.sub(v, 1, #t + 1) == t .. ' ' then
  local e = string.find(v, ' ', #t + 2, true)
  -- At maxmemory (noeviction) the HSET is refused: the lock is deleted
  -- instead (a delete is allowed), and its next fence is the clock's.
  if type(redis.pcall('HSET', KEYS[1], 'v', '- ' .. string.sub(v, #t + 2, e - 1))) == 'table' then
    redis.call('DEL', KEYS[1])
  end
  return 1
end
if string.byte(v, 1) ~= 43 then -- unflagged, another's or free
  return 0
end
-- (libraries)
local st = lk_load(KEYS[1], nil, v)
if st.holder ~= t then
  return 0
end
local wake = q_waker(ARGV[2], ARGV[3])
lk_free(st, wake)
return q_reply(1, wake)
