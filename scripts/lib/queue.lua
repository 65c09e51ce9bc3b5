-- queue: the waiting queue and the fence counters shared by every object
-- that waits (locks, read-write locks and semaphores), prepended to the
-- scripts that use it (embed.go's load).
--
-- A queue is two keys under the object's hash tag: a sorted set token ->
-- arrival number (the order), and a hash token -> "deadline engine" or
-- "deadline engine owner": when the entry lapses unless its waiter extends
-- it (server ms), the id of the engine that waits, and the Owner the
-- waiter asked to be stored with its holding (any bytes; absent if none).
-- A semaphore's waiter that asks a weight above 1 has it after its
-- deadline ("deadlinewweight engine ...": "1700000000000w3 e1"), so that a
-- handoff knows it. A release that hands the object to a waiter
-- publishes "token fence arrival" on that engine's wake channel, <wake
-- prefix><engine id>; fence 0 tells the waiter to look again (a semaphore
-- refused its weight).
--
-- A fence counter is last + 1 while it lives; when it is gone (never
-- used, expired after its retention, lost in a restart) the next fence is
-- the server's clock in microseconds, which is above every fence handed
-- out before (each grant takes more than a microsecond), as long as the
-- clock has not stepped back further than the retention covers.

-- now_ms returns the server's clock in ms, and in microseconds (for
-- q_join's arrival numbers).
local function now_ms()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- fmt writes a whole number for Redis: Lua numbers are doubles, and
-- tostring prints only 14 digits of a 16-digit fence. '%.0f' prints any
-- double whole, but costs three times what '%d' does; '%d' takes a C long
-- (32 bits on some builds), so a number of 10 digits or more is written
-- as two parts below 10^9. Past 2^53 a double is no longer exact: '%.0f'
-- writes it as it is.
local function fmt(n)
  if n < 1e9 then
    return string.format('%d', n)
  elseif n < 9007199254740992 then
    return string.format('%d%09d', math.floor(n / 1e9), n % 1e9)
  end
  return string.format('%.0f', n)
end

-- counter_value returns the value v of fence counter key, as GET or MGET
-- read it, as a number (nil if absent: v nil or false), or an error reply
-- if it holds anything but a counter: what INCR takes (no sign, no leading
-- zero, below 2^63: at most 18 digits), so that no INCR after a script's
-- first write fails (checked before it).
local function counter_value(key, v)
  if v and v ~= '0' and not (#v <= 18 and string.match(v, '^[1-9]%d*$')) then
    return nil, redis.error_reply('ERR atomicredis: ' .. key .. ' does not hold a counter')
  end
  return tonumber(v)
end

-- counter_read returns a fence counter's value, as counter_value.
local function counter_read(key)
  return counter_value(key, redis.call('GET', key))
end

-- counter_next stores and returns the fence after last (nil: the counter
-- is gone), kept retention ms from now.
local function counter_next(key, last, retention)
  if last and last >= 9007199254740991 then -- past what a double holds exactly: INCR keeps the counter exact
    local f = redis.call('INCR', key)
    redis.call('PEXPIRE', key, retention)
    return f
  end
  local f = last and last + 1 or now_us()
  redis.call('SET', key, fmt(f), 'PX', retention)
  return f
end

-- q_entry returns token's entry: its deadline, engine id, owner (nil if
-- none) and weight, nil if it is not queued.
local function q_entry(w, token)
  local e = redis.call('HGET', w, token)
  if not e then return nil end
  local deadline, engine, owner = string.match(e, '^(%d+) (%S+) ?(.*)$')
  local weight = 1
  if not deadline then -- a semaphore's waiter of weight above 1
    deadline, weight, engine, owner = string.match(e, '^(%d+)w(%d+) (%S+) ?(.*)$')
    weight = tonumber(weight)
  end
  if owner == '' then owner = nil end
  return tonumber(deadline), engine, owner, weight
end

local function q_leave(q, w, token)
  redis.call('ZREM', q, token)
  redis.call('HDEL', w, token)
end

-- q_head returns the first live waiter (token, entry deadline, engine id,
-- arrival number, owner or nil, weight), dropping lapsed entries in front
-- of it; nil if none is queued.
local function q_head(q, w, now)
  while true do
    local first = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
    local head = first[1]
    if not head then return nil end
    local deadline, engine, owner, weight = q_entry(w, head)
    if deadline and deadline > now then return head, deadline, engine, tonumber(first[2]), owner, weight end
    q_leave(q, w, head)
  end
end

-- q_live counts the live waiters, writing nothing.
local function q_live(w, now)
  local n = 0
  for _, e in ipairs(redis.call('HVALS', w)) do
    if tonumber(string.match(e, '^%d+') or 0) > now then n = n + 1 end
  end
  return n
end

-- q_keep makes the queue's two keys outlive every entry in them: when
-- the waiters hash expires less than 1.5 entry_ms from now, both keys are
-- set to expire 2 entry_ms from now (the half lifetime of slack covers the
-- time between the script's start, from which Redis 7 counts expiries in
-- a script, and its TIME). So a queue whose waiters all died (no extension,
-- no abandon) on a name nobody uses again is gone at most two entry
-- lifetimes after its last write, and extensions extend the keys about
-- every other extension. An expiry is never shortened: engines with other
-- entry lifetimes may share a queue.
local function q_keep(q, w, entry_ms)
  if redis.call('PTTL', w) < 1.5 * entry_ms then
    redis.call('PEXPIRE', w, 2 * entry_ms)
    redis.call('PEXPIRE', q, 2 * entry_ms)
  end
end

-- q_join queues token at the tail, or extends its entry if it is queued
-- (extend: the caller believes it is); queued is the queue's length as the
-- caller read it. Returns the rank (0 = head; for a new entry, the number
-- of entries ahead of it, lapsed ones included) and, for a new entry, the
-- arrival number (0 for an extension). An arrival number is the last one
-- plus one, and at least the server's clock in microseconds (now_micros,
-- as now_ms read it with now), so that an entry does not get the number
-- of an earlier one of the name even after the queue emptied (the clock
-- moves between scripts): a wake-up names the entry it was for, and the
-- numbers give the order of arrival over the name's history. owner (nil:
-- none) goes with the entry, for the holding it may be handed, and so
-- does weight (nil or 1: none). The entry is written first: the waiters
-- hash's type is checked by that first write, before the queue's.
local function q_join(q, w, token, now, now_micros, entry_ms, engine, queued, extend, owner, weight)
  local entry = fmt(now + entry_ms)
  if weight and weight > 1 then entry = entry .. 'w' .. fmt(weight) end
  entry = entry .. ' ' .. engine
  if owner then entry = entry .. ' ' .. owner end
  redis.call('HSET', w, token, entry)
  local rank, arrival = false, 0
  if extend and queued > 0 then
    rank = redis.call('ZRANK', q, token)
  end
  if not rank then
    local last = queued > 0 and redis.call('ZRANGE', q, -1, -1, 'WITHSCORES')[2]
    arrival = math.max((tonumber(last) or 0) + 1, now_micros or now * 1000)
    if redis.call('ZADD', q, 'NX', fmt(arrival), token) == 1 then
      rank = queued
    else
      rank, arrival = redis.call('ZRANK', q, token), 0
    end
  end
  q_keep(q, w, entry_ms)
  return rank, arrival
end

-- q_send tells a waiter, through its engine's wake channel, that its
-- entry was handed a fence: msg, "token fence arrival".
-- A refused publish (say, an ACL user without channel rights) must not
-- abort a script after its writes, so it is a pcall: the waiter then finds
-- what it was handed when it extends its entry. wake is the channels'
-- prefix, or a release script's q_waker: then a wake-up of a waiter of
-- the caller's own engine is not published but kept for the reply
-- (q_reply), and that engine wakes its waiter itself.
local function q_send(wake, engine, msg)
  if type(wake) == 'table' then
    if engine == wake.self then
      wake.mine[#wake.mine + 1] = msg
      return
    end
    wake = wake.prefix
  end
  redis.pcall('PUBLISH', wake .. engine, msg)
end

-- q_wake is q_send of the wake-up "token fence arrival" (numbers).
local function q_wake(wake, engine, token, fence, arrival)
  q_send(wake, engine, token .. ' ' .. fmt(fence) .. ' ' .. fmt(arrival))
end

-- q_waker is q_wake's wake for a release script called by engine self
-- (nil: none, so that every wake-up is published), prefix the channels'
-- prefix.
local function q_waker(prefix, self)
  return {prefix = prefix, self = self, mine = {}}
end

-- q_reply is a release script's reply: n, or, if it handed something to
-- waiters of its caller's engine, {n, their wake-ups...}.
local function q_reply(n, wake)
  if #wake.mine == 0 then return n end
  local r = {n}
  for i, msg in ipairs(wake.mine) do r[i + 1] = msg end
  return r
end

-- batch_each returns the replies of extend(i) for i = 1 to n, the holdings
-- of a batch: a key of another type makes its holding's reply 0 (gone)
-- and fails only that one (extend reads each key before it writes it);
-- any other error (OOM) ends the script.
local function batch_each(n, extend)
  local out = {}
  for i = 1, n do
    local ok, r = pcall(extend, i)
    if not ok then
      if not string.find(type(r) == 'table' and r.err or tostring(r), 'WRONGTYPE', 1, true) then
        error(r, 0)
      end
      r = 0
    end
    out[i] = r
  end
  return out
end
