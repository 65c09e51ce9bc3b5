-- lock_acquire_all: take every one of n locks at once if each is free,
-- nobody is queued for it and its token was not abandoned; else none
-- (LockAll's one try, on a server that is not a cluster: the names' keys
-- are in other slots).
-- KEYS[3i+1..3i+3], for the i-th lock from 0: the lock, its queue, its
-- token's abandon mark; then KEYS[3n+1..4n] the locks' fence counters, in
-- the same order
-- ARGV[1] lease in ms, ARGV[2] fence retention in ms, ARGV[3] the Owner to
-- store with each ("" for none), ARGV[4+i] the i-th lock's token
-- reply: {1, fence of each} if all are the caller's now; {0, i} if the
-- i-th lock (from 1) is not free.
--
-- Every key is read before anything is written (a counter of the wrong type
-- fails the script with nothing changed). The common case reads with two
-- commands whatever n: one EXISTS of every lock, queue and abandon mark,
-- one MGET of the counters (a counter MGET finds absent is read again
-- with GET, which fails on a key of another type); then it writes two
-- keys a name: the counter, one past what MGET read, with its retention
-- renewed in the same SET (lib/queue.lua's counter_next), and the lock.
local n = #KEYS / 4
if redis.call('EXISTS', unpack(KEYS, 1, 3 * n)) > 0 then
  for i = 0, n - 1 do
    if redis.call('EXISTS', KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3]) > 0 then
      return {0, i + 1}
    end
  end
end
local last = redis.call('MGET', unpack(KEYS, 3 * n + 1, 4 * n))
for i = 1, n do
  local v, err = counter_value(KEYS[3 * n + i], last[i] or redis.call('GET', KEYS[3 * n + i]))
  if err then return err end
  last[i] = v
end
local reply = {1}
local owner = ARGV[3] ~= '' and ARGV[3] or nil
for i = 1, n do
  local f = counter_next(KEYS[3 * n + i], last[i], ARGV[2])
  redis.call('SET', KEYS[3 * i - 2], lock_value(ARGV[3 + i], f, '0', owner), 'PX', ARGV[1])
  reply[i + 1] = f
end
return reply
