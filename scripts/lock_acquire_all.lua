-- lock_acquire_all: take every one of n locks at once if each is free,
-- nobody is queued for it and no abandon mark stands in it; else none
-- (LockAll's one try, on a server that is not a cluster: the names' keys
-- are in other slots).
-- KEYS[i] the i-th lock's hash (lib/lock.lua)
-- ARGV[1] lease in ms, ARGV[2] fence retention in ms (not needed), ARGV[3]
-- the Owner to store with each ("" for none), ARGV[3+i] the i-th lock's
-- token
-- reply: {1, fence of each} if all are the caller's now; {0, i} if the
-- i-th lock (from 1) is not free.
--
-- Every key is read before anything is written (a key of the wrong type
-- fails the script with nothing changed): a lock is free for it if its
-- hash is absent (its fence then the clock's) or holds "- fence" alone
-- (unflagged: nobody queued, no mark). A flagged lock, even free, is
-- refused: its queue goes first.
local n = #KEYS
local fences = {}
local clock = nil
for i = 1, n do
  local v = redis.call('HGET', KEYS[i], 'v')
  if not v then
    if not clock then
      local t = redis.call('TIME')
      clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    fences[i] = clock
  elseif string.byte(v, 1) == 45 and string.byte(v, 2) == 32 then
    fences[i] = tonumber(string.sub(v, 3)) + 1
  else
    return {0, i}
  end
end
local reply = {1}
local owner = ARGV[3] ~= '' and ARGV[3] or nil
for i = 1, n do
  redis.call('HSET', KEYS[i], 'v', lock_value(ARGV[3 + i], fences[i], '0', owner))
  redis.call('PEXPIRE', KEYS[i], ARGV[1])
  reply[i + 1] = fences[i]
end
return reply
