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
-- fails the script with nothing changed). The common case reads with two
-- commands whatever n: one EXISTS of every lock, queue and abandon mark,
-- one MGET of the counters (a counter MGET finds absent is read again
-- with GET, which fails on a key of another type); then each counter is
-- INCRed and its retention renewed, as lock_acquire's common case does.
local n = #KEYS / 4
local taken, counters = {}, {}
for i = 0, n - 1 do
  taken[3 * i + 1], taken[3 * i + 2], taken[3 * i + 3] = KEYS[4 * i + 1], KEYS[4 * i + 3], KEYS[4 * i + 4]
  counters[i + 1] = KEYS[4 * i + 2]
end
if redis.call('EXISTS', unpack(taken)) > 0 then
  for i = 0, n - 1 do
    if redis.call('EXISTS', KEYS[4 * i + 1], KEYS[4 * i + 3], KEYS[4 * i + 4]) > 0 then
      return {0, i + 1}
    end
  end
end
local last = redis.call('MGET', unpack(counters))
for i = 1, n do
  local v, err = counter_value(counters[i], last[i] or redis.call('GET', counters[i]))
  if err then return err end
  last[i] = v
end
local reply, now = {1}, nil
for i = 1, n do
  local f = last[i]
  if f then
    f = redis.call('INCR', counters[i])
    redis.call('PEXPIRE', counters[i], ARGV[2])
  else -- the counter was gone: start from the clock
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    f = now
    redis.call('SET', counters[i], string.format('%.0f', f), 'PX', ARGV[2])
  end
  local value = ARGV[3 + i] .. ' ' .. string.format('%.0f', f) .. ' 0'
  if ARGV[3] ~= '' then value = value .. ' ' .. ARGV[3] end
  redis.call('SET', KEYS[4 * i - 3], value, 'PX', ARGV[1])
  reply[i + 1] = f
end
return reply
