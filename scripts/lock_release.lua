-- lock_release: free the lock only if the caller still holds it, and hand
-- it to the first live waiter, whom it wakes.
-- KEYS[1] the lock's hash (lib/lock.lua)
-- ARGV[1] token, ARGV[2] wake channel prefix, ARGV[3] the caller's engine
-- id (absent: none)
-- reply: 1 if it was held (and is now free or handed over), 0 if the
-- caller no longer held it; {1, "token fence arrival"} if it was handed
-- to a waiter of the caller's engine, which is not published: the caller
-- wakes its waiter (lib/queue.lua's q_reply).
--
-- Unflagged (nobody queued, no abandon mark: the common case) the holding
-- opens with the caller's token and a space, and the free value "- fence"
-- is written in its place: the hash keeps its PX, the rest of the lease
-- (at maxmemory, where that write is refused, the hash is deleted).
-- The shared Lua after it is only defined for a flagged lock.
local v = redis.call('HGET', KEYS[1], 'v')
local t = ARGV[1]
if not v then
  return 0
end
if string.sub(v, 1, #t + 1) == t .. ' ' then
  local e = string.find(v, ' ', #t + 2, true)
  -- At maxmemory (noeviction) the HSET is refused: the lock is deleted
  -- instead (a delete is allowed), and its next fence is the clock's.
  if type(redis.pcall('HSET', KEYS[1], 'v', '- ' .. string.sub(v, #t + 2, e - 1))) == 'table' then
    redis.call('DEL', KEYS[1])
  end
  return 1
end
if string.byte(v, 1) ~= 43 then -- unflagged, another's or free
  return 0
end
-- A flagged holder's release that hands the lock to a live head (no
-- lapsed mark to clear): read, checked and written here, before the
-- shared Lua is defined, as lib/lock.lua's lk_load and lk_free would;
-- the lock stays flagged while more wait or a mark stands, else it is
-- 'v' alone again. Every other case goes through them.
if string.sub(v, 2, #t + 2) == t .. ' ' then
  local s = redis.call('HMGET', KEYS[1], 'd', 'q')
  local q = s[2]
  local c = q and redis.call('TIME')
  local now_us = c and tonumber(c[1]) * 1000000 + tonumber(c[2])
  local now = c and math.floor(now_us / 1000)
  if c and (tonumber(s[1]) or 0) > now then
    -- "h t n a xd", read without a pattern
    local p1 = string.find(q, ' ', 1, true)
    local p2 = string.find(q, ' ', p1 + 1, true)
    local p3 = string.find(q, ' ', p2 + 1, true)
    local p4 = string.find(q, ' ', p3 + 1, true)
    local xs = string.sub(q, p4 + 1)
    local xd = xs ~= '0' and tonumber(xs) or 0
    local n = tonumber(string.sub(q, p2 + 1, p3 - 1))
    local h = string.sub(q, 1, p1 - 1)
    local raw = n > 0 and (xd == 0 or xd > now) and redis.call('HGET', KEYS[1], 'e:' .. h)
    -- the head entry "token deadline arrival engine[ owner]"
    local a = raw and string.find(raw, ' ', 1, true)
    local b = a and string.find(raw, ' ', a + 1, true)
    if b and tonumber(string.sub(raw, a + 1, b - 1)) > now then
      local w, ds = string.sub(raw, 1, a - 1), string.sub(raw, a + 1, b - 1)
      local e = string.find(v, ' ', #t + 3, true) -- the holder's fence ends
      local f = tonumber(string.sub(v, #t + 3, e and e - 1 or -1)) + 1
      local fs = f < 1e9 and string.format('%d', f) or string.format('%d%09d', math.floor(f / 1e9), f % 1e9) -- lib/queue.lua's fmt
      local ar = string.find(raw, ' ', b + 1, true) -- the arrival's end
      local o = string.find(raw, ' ', ar + 1, true) -- the engine's
      local holding = w .. ' ' .. fs .. ' 0' .. (o and string.sub(raw, o) or '')
      -- HDEL first: at maxmemory Redis allows it, and the HSET after it
      if n > 1 or xd > now then
        redis.call('HDEL', KEYS[1], 'e:' .. h, 'k:' .. w)
        redis.call('HSET', KEYS[1], 'v', '+' .. holding, 'd', ds,
          'q', string.format('%d ', tonumber(h) + 1) .. string.sub(q, p1 + 1, p2) .. string.format('%d', n - 1) .. string.sub(q, p3))
        -- the hash's PX runs to every entry's deadline already
      else -- the last entry, no mark: unflagged, 'v' alone, its PX the new lease
        redis.call('HDEL', KEYS[1], 'e:' .. h, 'k:' .. w, 'd', 'q')
        redis.call('HSET', KEYS[1], 'v', holding)
        redis.call('PEXPIRE', KEYS[1], tonumber(ds) - now)
      end
      local engine, msg = string.sub(raw, ar + 1, o and o - 1 or -1), w .. ' ' .. fs .. ' ' .. string.sub(raw, b + 1, ar - 1)
      if engine == ARGV[3] then return {1, msg} end -- the caller's engine wakes its waiter
      redis.pcall('PUBLISH', ARGV[2] .. engine, msg)
      return 1
    end
  end
end
-- (libraries)
local st = lk_load(KEYS[1], nil, v)
if st.holder ~= t then
  return 0
end
local wake = q_waker(ARGV[2], ARGV[3])
lk_free(st, wake)
return q_reply(1, wake)
