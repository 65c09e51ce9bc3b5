-- hp_acquire: a design measured, not the library's: design h (one hash a
-- name, every key of it in one) with the lease as the hash's PX while no
-- waiter and no abandon mark is in it: its holding 'v' is "token fence 0"
-- held, "- fence" free (kept for the rest of the lease), and a waiter's
-- join or an abandon (not measured here) flags 'v' and keeps the hash for
-- the retention, its lease's end then in 'v' and the clock read (the slow
-- path). An absent hash: the fence from the clock.
-- KEYS[1] the name's hash; ARGV[1] token, ARGV[2] lease in ms
-- reply: the fence if taken, 0 if not (or flagged: the slow path)
local v = redis.call('HGET', KEYS[1], 'v')
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
redis.call('HSET', KEYS[1], 'v', ARGV[1] .. ' ' .. string.format('%d', f) .. ' 0')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return f
