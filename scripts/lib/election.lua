-- election: an election is a lock of its own keys (kind "election") whose
-- scripts are the lock's, each wrapped (embed.go's loadObserved) so that a
-- change of leader or of its value is published to every engine that
-- observes the election. The wrapped scripts take one key more, last: the
-- observers, a sorted set wake channel -> registration deadline (server
-- ms), written by election_observe. Needs lib/queue.lua and lib/lock.lua.
--
-- A state goes out as "!term pttl keylen key owner": the leader's term
-- (its fence) and remaining lease, or, with pttl -1, no leader and the
-- last term handed out (the fence counter, 0 if none); then the lock's key
-- (the observing engine's index of its observers, its length first since
-- a name may hold spaces) and the leader's owner, the rest of the message.

-- el_state is the election's state as a message for its lock's key.
local function el_state(lock, fence)
  local token, term, _, owner = lock_parse(redis.call('GET', lock))
  if token then
    return '!' .. fmt(term) .. ' ' .. redis.call('PTTL', lock) .. ' ' .. #lock .. ' ' .. lock .. (owner or '')
  end
  return '!' .. (redis.call('GET', fence) or '0') .. ' -1 ' .. #lock .. ' ' .. lock
end

-- el_notify publishes the state to every engine registered as observing,
-- if the lock's value is no longer before (as read before the wrapped
-- script ran): a new leader, none, or another owner. An extension does
-- not go through here.
local function el_notify(lock, fence, observers, before)
  if redis.call('GET', lock) == before then return end
  local channels = redis.call('ZRANGEBYSCORE', observers, now_ms(), '+inf')
  if #channels == 0 then return end
  local msg = el_state(lock, fence)
  for _, channel in ipairs(channels) do
    redis.pcall('PUBLISH', channel, msg)
  end
end
