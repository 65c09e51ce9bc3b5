-- semaphore_extend: move a live permit's deadline to now + TTL. It also
-- confirms a permit handed over to a waiter, whose deadline was the end
-- of its queue entry.
-- KEYS[1] timeouts, KEYS[2] owner, KEYS[3] counter, KEYS[4] limit, KEYS[5]
-- queue, KEYS[6] waiters, KEYS[7] owners (a permit found gone loses its
-- Owner here), KEYS[8] the permit's extension number (a string of its
-- own, <sem>:seq:<id>, that ends with the permit's deadline)
-- ARGV[1] id, ARGV[2] TTL in ms, ARGV[3] fence retention in ms, ARGV[4]
-- wake channel prefix, ARGV[5] the extension's sequence number (the holder
-- numbers its extensions 1, 2, 3, ... as it sends them)
-- reply: 1 if extended; 2 if live but this extension is older than one
-- already applied (it changes nothing); 0 if it had timed out or was gone.
--
-- The sequence is what lets Extend win against a watchdog extension sent
-- before it but delayed (as lock_extend's): whichever lands last, the
-- server keeps the deadline of the extension sent last.
--
-- Unlike the book's refresh_fair_semaphore, which ZADDs first and so brings
-- a timed-out permit back, a permit past its deadline is never revived: its
-- remnants are removed, its slot goes to a waiter, and the caller is told.
local k = {timeouts = KEYS[1], owner = KEYS[2], counter = KEYS[3], limit = KEYS[4], q = KEYS[5], w = KEYS[6], owners = KEYS[7]}
local now = now_ms()
local deadline = redis.call('ZSCORE', k.timeouts, ARGV[1])
local rank = redis.call('ZSCORE', k.owner, ARGV[1])
if deadline and rank and tonumber(deadline) > now then
  if tonumber(redis.call('GET', KEYS[8]) or 0) >= tonumber(ARGV[5]) then
    return 2
  end
  -- PEXPIRE first, as lock_extend: at maxmemory (noeviction) Redis fails a
  -- script's first write that may grow memory (ZADD, SET), and lets later
  -- ones run once it has written; a permit is extended where a lock is.
  redis.call('PEXPIRE', KEYS[8], ARGV[2])
  redis.call('ZADD', k.timeouts, now + tonumber(ARGV[2]), ARGV[1])
  redis.call('SET', KEYS[8], ARGV[5], 'PX', ARGV[2])
  return 1
end
local st, err = sem_read(k)
if err then return err end
sem_drop(k, st, ARGV[1], now)
sem_purge(k, st, now)
sem_settle(k, st, now, ARGV[3], ARGV[4])
return 0
