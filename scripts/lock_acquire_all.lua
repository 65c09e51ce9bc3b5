-- lock_acquire_all: take every one of n locks at once if each is free,
-- nobody is queued for it and its token was not abandoned; else none
-- (LockAll's one try, on a server that is not a cluster: the names' keys
-- are in other slots).
-- KEYS[i] the i-th lock's hash (lib/lock.lua)
-- ARGV[1] lease in ms, ARGV[2] the Owner to store with each ("" for
-- none), ARGV[2+i] the i-th lock's token
-- reply: {1, fence of each} if all are the caller's now; {0, i} if the
-- i-th lock (from 1) is not free.
--
-- Every key is read before anything is written (a key of the wrong type
-- fails the script with nothing changed). A lock is free for it if its
-- hash is absent (its fence then the clock's) or holds "- fence" alone
-- (unflagged: the common case, no clock read but for an absent hash's
-- fence); a flagged one (lib/lock.lua) if no entry is queued, its token
-- has no mark and no lease runs, by the clock: it is then taken flagged
-- (its lease's end in 'd').
local n = #KEYS
local fences, flagged = {}, {}
local now, clock = nil, nil
local function time()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
end
for i = 1, n do
  local v = redis.call('HGET', KEYS[i], 'v')
  if not v then
    time()
    fences[i] = clock
  elseif string.byte(v, 1) == 45 and string.byte(v, 2) == 32 then
    fences[i] = tonumber(string.sub(v, 3)) + 1
  elseif string.byte(v, 1) == 43 then
    time()
    local s = redis.call('HMGET', KEYS[i], 'q', 'd', 'x:' .. ARGV[2 + i])
    s[1] = string.match(s[1] or '', '^%d+ %d+ (%d+)') -- the queue's count (lib/lock.lua)
    local last = string.match(v, '^%+%- (%d+)')
    if not last and (tonumber(s[2]) or 0) <= now then -- a lease that ended
      local _, f = lock_parse(string.sub(v, 2))
      last = f
    end
    if not last or (tonumber(s[1]) or 0) > 0 or (tonumber(s[3]) or 0) > now then
      return {0, i}
    end
    fences[i], flagged[i] = tonumber(last) + 1, true
  else
    return {0, i}
  end
end
local reply = {1}
local owner = ARGV[2] ~= '' and ARGV[2] or nil
for i = 1, n do
  local value = lock_value(ARGV[2 + i], fences[i], '0', owner)
  if flagged[i] then
    if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[1]) then
      redis.call('PEXPIRE', KEYS[i], ARGV[1])
    end
    redis.call('HSET', KEYS[i], 'v', '+' .. value, 'd', fmt(now + tonumber(ARGV[1])))
  else
    redis.call('HSET', KEYS[i], 'v', value)
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
  end
  reply[i + 1] = fences[i]
end
return reply
