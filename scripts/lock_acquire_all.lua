-- lock_acquire_all: take every one of n locks at once if each is free,
-- nobody is queued for it and its token was not abandoned; else none
-- (LockAll's one try, on a server that is not a cluster: the names' keys
-- are in other slots).
-- KEYS[4i+1..4i+4], for the i-th lock from 0: the lock, its fence
-- counter, its queue, its token's abandon mark
-- ARGV[1] lease in ms, ARGV[2] fence retention in ms, ARGV[3] the Owner to
-- store with each ("" for none), ARGV[4+i] the i-th lock's token
-- reply: {1, fence of each} if all are the caller's now; {0, i} if the
-- i-th lock (from 1) is not free.
--
-- Every key is read before anything is written (a counter of the wrong type
-- fails the script with nothing changed).
local n = #KEYS / 4
for i = 0, n - 1 do
  if redis.call('EXISTS', KEYS[4 * i + 1], KEYS[4 * i + 3], KEYS[4 * i + 4]) > 0 then
    return {0, i + 1}
  end
end
local last = {}
for i = 0, n - 1 do
  local v, err = counter_read(KEYS[4 * i + 2])
  if err then return err end
  last[i] = v
end
local reply = {1}
for i = 0, n - 1 do
  local f = counter_next(KEYS[4 * i + 2], last[i], ARGV[2])
  local value = ARGV[4 + i] .. ' ' .. fmt(f) .. ' 0'
  if ARGV[3] ~= '' then value = value .. ' ' .. ARGV[3] end
  redis.call('SET', KEYS[4 * i + 1], value, 'PX', ARGV[1])
  reply[i + 2] = f
end
return reply
