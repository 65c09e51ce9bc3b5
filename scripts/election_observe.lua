-- election_observe: register an engine's wake channel as observing an
-- election until a deadline (or take it off), and read the election's
-- state.
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] observers
-- ARGV[1] the observing engine's wake channel, ARGV[2] how long the
-- registration lasts in ms (0: take it off; the engine never does: a
-- registration ends with its deadline)
-- reply: the state, "!term pttl keylen key owner" (lib/election.lua).
--
-- The observers key lives one to two registrations' lengths past the last
-- one, so an election nobody observes any more leaves nothing behind.
redis.call('ZCARD', KEYS[3]) -- its type, before the first write
local state = el_state(KEYS[1], KEYS[2])
local ms = tonumber(ARGV[2])
if ms == 0 then
  redis.call('ZREM', KEYS[3], ARGV[1])
  return state
end
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZADD', KEYS[3], now + ms, ARGV[1])
if redis.call('PTTL', KEYS[3]) < ms then
  redis.call('PEXPIRE', KEYS[3], 2 * ms)
end
return state
