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
-- A leader's owner is "change value": its value (Campaign's, then
-- SetOwner's) after how many times it proclaimed one in its term (0 at its
-- campaign), so that an observer who read the state orders a message
-- published before that read, and delivered after it, as older.

-- el_state is the election's state as a message for its lock's key;
-- before, if given, the lock's value before a script freed it: with no
-- leader and the counter gone (a leader that held past the fence
-- retention resigned), the last term handed out is that leader's.
local function el_state(lock, fence, before)
  local token, term, _, owner = lock_parse(redis.call('GET', lock))
  if token and token ~= '-' then
    return '!' .. fmt(term) .. ' ' .. redis.call('PTTL', lock) .. ' ' .. #lock .. ' ' .. lock .. (owner or '')
  end
  local last = redis.call('GET', fence)
  if not last and before then
    local was, f = lock_parse(before)
    if was and was ~= '-' then last = fmt(f) end
  end
  return '!' .. (last or '0') .. ' -1 ' .. #lock .. ' ' .. lock
end

-- el_proclaim is the owner a proclamation of value stores with the lock:
-- value, after one more proclamation than the lock's owner counts.
local function el_proclaim(lock, value)
  local _, _, _, owner = lock_read(lock)
  local n = tonumber(string.match(owner or '', '^(%d+) ')) or 0
  return fmt(n + 1) .. ' ' .. value
end

-- el_notify publishes the state to every engine registered as observing,
-- if the lock's value is no longer before (as read before the wrapped
-- script ran): a new leader, none, or another owner. An extension does
-- not go through here.
local function el_notify(lock, fence, observers, before)
  if redis.call('GET', lock) == before then return end
  local channels = redis.call('ZRANGEBYSCORE', observers, now_ms(), '+inf')
  if #channels == 0 then return end
  local msg = el_state(lock, fence, before)
  for _, channel in ipairs(channels) do
    redis.pcall('PUBLISH', channel, msg)
  end
end

-- el_guard runs before a campaign's acquire. A term counter that is gone
-- (a new election, none for the fence retention, or lost in a restart
-- without persistence) may have gone with a leader still in office, whose
-- lease runs on in its process: so the first term after it waits one lease
-- (the candidate's). Meanwhile the lock holds "- deadline 0", which no
-- candidate's token matches, so candidates queue behind it as behind a
-- holder; past its deadline by the server's clock (TIME: a server that
-- does not expire keys on its own lets it go too) it is deleted. The
-- counter starts now, from the clock, so the next attempt finds it: it is
-- kept the lease and the retention, since a counter that expired within
-- the lease (a retention no longer than it) would make every attempt wait
-- again, for ever.
local function el_guard(lock, fence, lease, retention)
  local v = redis.call('GET', lock)
  if v then
    local holder, deadline = lock_parse(v)
    if holder == '-' and deadline <= now_ms() then
      redis.call('DEL', lock)
    end
    return
  end
  local _, err = counter_read(fence)
  if err or redis.call('EXISTS', fence) == 1 then return end
  redis.call('SET', lock, lock_value('-', now_ms() + lease, '0'), 'PX', lease)
  redis.call('SET', fence, fmt(now_us()), 'PX', tonumber(retention) + lease)
end
