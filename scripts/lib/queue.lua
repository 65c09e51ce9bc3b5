-- queue: the waiting queue shared by every object that waits (locks,
-- read-write locks and semaphores), prepended to the scripts that use it
-- (embed.go's load). A queue is two keys under the object's hash tag:
-- a sorted set token -> arrival number (the order), and a hash token ->
-- "deadline inbox" (when the entry lapses unless its waiter renews it, in
-- server ms, and the list its engine blocks on). Waking a waiter pushes
-- "token fence" to its inbox.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- q_check reads both keys, so a key of the wrong type fails the script
-- before its first write; it returns how many entries are queued, live or
-- not (0: nobody waits, and the queue needs no more work).
local function q_check(q, w)
  redis.call('HLEN', w)
  return redis.call('ZCARD', q)
end

local function q_entry(w, token)
  local e = redis.call('HGET', w, token)
  if not e then return nil end
  local sp = string.find(e, ' ', 1, true)
  return tonumber(string.sub(e, 1, sp - 1)), string.sub(e, sp + 1)
end

local function q_leave(q, w, token)
  redis.call('ZREM', q, token)
  redis.call('HDEL', w, token)
end

-- q_head returns the first live waiter (token, entry deadline, inbox),
-- dropping lapsed entries in front of it; nil if none is queued.
local function q_head(q, w, now)
  while true do
    local head = redis.call('ZRANGE', q, 0, 0)[1]
    if not head then return nil end
    local deadline, inbox = q_entry(w, head)
    if deadline and deadline > now then return head, deadline, inbox end
    q_leave(q, w, head)
  end
end

-- q_live reports whether any live waiter is queued, writing nothing.
local function q_live(w, now)
  for _, e in ipairs(redis.call('HVALS', w)) do
    if tonumber(string.sub(e, 1, string.find(e, ' ', 1, true) - 1)) > now then return true end
  end
  return false
end

-- q_join queues token at the tail, or renews its entry if it is queued;
-- returns its rank (0 = head) and arrival number.
local function q_join(q, w, token, now, entry_ms, inbox)
  local arrival = redis.call('ZSCORE', q, token)
  if not arrival then
    local last = redis.call('ZRANGE', q, -1, -1, 'WITHSCORES')
    arrival = (tonumber(last[2]) or 0) + 1
    redis.call('ZADD', q, arrival, token)
  end
  redis.call('HSET', w, token, (now + entry_ms) .. ' ' .. inbox)
  return redis.call('ZRANK', q, token), tonumber(arrival)
end

-- q_wake tells a waiter, through its engine's inbox, that it was handed
-- fence; the inbox outlives the waiter's entry by a little, no more.
local function q_wake(inbox, token, fence, deadline, now)
  redis.call('RPUSH', inbox, token .. ' ' .. fence)
  redis.call('PEXPIRE', inbox, deadline - now + 1000)
end

-- q_unwake takes back the wake-ups an inbox holds for token (a waiter that
-- left), so none lingers.
local function q_unwake(inbox, token)
  for _, m in ipairs(redis.call('LRANGE', inbox, 0, -1)) do
    if string.sub(m, 1, #token + 1) == token .. ' ' then
      redis.call('LREM', inbox, 0, m)
    end
  end
end

