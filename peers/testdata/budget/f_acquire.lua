-- f_acquire: a design measured, not the library's: a fast script of one
-- key, tried first, that takes a free name whose value says nobody waits
-- and no abandon mark stands ("- fence", kept after a release for the
-- rest of the lease: f_release), or an absent one (its fence from the
-- clock, as the counter's is after a restart); anything else (held, or
-- flagged by a waiter or a mark after its fence) goes to the full script,
-- which passes every key. The lock's lease is the key's PX, as today.
-- KEYS[1] lock; ARGV[1] token, ARGV[2] lease in ms
-- reply: the fence if taken, 0 if the full script must decide
local v = redis.call('GET', KEYS[1])
local f
if v then
  if string.byte(v, 1) ~= 45 or string.find(v, ' ', 3, true) then
    return 0
  end
  f = tonumber(string.sub(v, 3)) + 1
else
  local t = redis.call('TIME')
  f = t[1] * 1000000 + t[2]
end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. string.format('%d', f) .. ' 0', 'PX', ARGV[2])
return f
