-- h_handoff: a design measured, not the library's: a release in design h
-- (h_acquire) that hands the lock to the queue's first live entry (from
-- the head 'h', skipping entries abandoned or past their deadline) and
-- wakes it with PUBLISH.
-- KEYS[1] the name's hash; ARGV[1] token, ARGV[2] wake channel prefix
-- reply: 1 if it was held (now free or handed over), 0 if not
local tok = ARGV[1]
local s = redis.call('HMGET', KEYS[1], 'v', 'q', 'h')
local v = s[1]
if not v or string.sub(v, 1, #tok + 1) ~= tok .. ' ' then return 0 end
local fence, e = string.match(v, '^%S+ (%d+) (%d+)')
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if tonumber(e) <= now then return 0 end
local q = tonumber(s[2]) or 0
if q == 0 then
  redis.call('HSET', KEYS[1], 'v', '- ' .. fence .. ' 0')
  return 1
end
local h = tonumber(s[3]) or 1
while q > 0 do
  local entry = redis.call('HGET', KEYS[1], 'e:' .. h)
  if entry then
    local w, deadline, engine = string.match(entry, '^(%S+) (%d+) (%S+)')
    q = q - 1
    if tonumber(deadline) > now then
      local f = tonumber(fence) + 1
      redis.call('HDEL', KEYS[1], 'e:' .. h, 'k:' .. w)
      redis.call('HSET', KEYS[1], 'v', w .. ' ' .. string.format('%d', f) .. ' ' .. deadline, 'h', h + 1, 'q', q)
      redis.call('PUBLISH', ARGV[2] .. engine, w .. ' ' .. f)
      return 1
    end
    redis.call('HDEL', KEYS[1], 'e:' .. h, 'k:' .. w)
  end
  h = h + 1
end
redis.call('HSET', KEYS[1], 'v', '- ' .. fence .. ' 0', 'h', h, 'q', 0)
return 1
