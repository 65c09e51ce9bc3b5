-- rw_release: end the caller's hold of a read-write lock, and hand the lock
-- to the waiters it can go to now (the last reader out lets a writer in;
-- a writer lets in the whole run of readers at the head), waking them.
-- KEYS[1] leases, KEYS[2] holds, KEYS[3] fence counter, KEYS[4] queue,
-- KEYS[5] waiters
-- ARGV[1] token, ARGV[2] fence retention in ms, ARGV[3] wake channel
-- prefix
-- reply: 1 if the caller held (and no longer does), 0 if its hold had run
-- out or was gone (any remnant is removed either way).
local k = {leases = KEYS[1], holds = KEYS[2], fence = KEYS[3], q = KEYS[4], w = KEYS[5],
  retention = ARGV[2], wake = ARGV[3]}
local now, token = now_ms(), ARGV[1]
local lease = redis.call('ZSCORE', k.leases, token)
-- Read what this call may write (type errors before the first write): the
-- fence and the waiters only if someone is queued to be handed the lock.
local waiters = redis.call('ZCARD', k.q) > 0
if waiters then
  local err = rw_fence_ok(k)
  if err then return err end
  redis.call('HLEN', k.w)
end
redis.call('HDEL', k.holds, token, 'f:' .. token, 'o:' .. token) -- the first write: holds' type checked
redis.call('ZREM', k.leases, token)
local _, expired = rw_first(k, now)
if expired then
  rw_purge(k, now)
end
if waiters then
  local _, wrote = rw_admit(k, now, nil)
  if wrote then
    rw_expire(k, now, true)
  end
end
if lease and tonumber(lease) > now then
  return 1
end
return 0
