-- onekey_acquire: a design measured, not the library's: one key a name
-- holds the fence, the holder and its lease's deadline by the server's
-- clock ("fence" when free, "fence token seq deadline" when held), kept
-- for the fence retention, so a free name is read and written in one key
-- KEYS as lock_acquire's; ARGV as lock_acquire's
local v = redis.call('GET', KEYS[1])
local f, holder, deadline = 0, nil, nil
if v then
  f, holder, deadline = string.match(v, '^(%d+) ?(%S*) ?%d* ?(%d*)')
  f = tonumber(f)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if (not holder or holder == '' or tonumber(deadline) <= now) and redis.call('EXISTS', KEYS[3], KEYS[5]) == 0 then
  f = f + 1
  redis.call('SET', KEYS[1], f .. ' ' .. ARGV[1] .. ' 0 ' .. (now + tonumber(ARGV[4])), 'PX', ARGV[5])
  return {1, f}
end
return {0}
