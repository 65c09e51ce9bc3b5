-- rw_extend: give the caller's hold of a read-write lock a new lease, only
-- if it is live and no later extension of its own has landed first (as
-- lock_extend). Other holds are untouched.
-- KEYS[1] leases, KEYS[2] holds
-- ARGV[1] token, ARGV[2] new lease in ms, ARGV[3] the extension's sequence
-- number (the holder numbers its extensions 1, 2, 3, ... as it sends them)
-- reply: 1 if extended; 2 if held but this extension is older than one
-- already applied (it changes nothing); 0 if the caller's hold ran out or
-- is gone.
local now = now_ms()
local lease = redis.call('ZSCORE', KEYS[1], ARGV[1])
local seq = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or 0)
if not lease or tonumber(lease) <= now then
  return 0
end
if seq >= tonumber(ARGV[3]) then
  return 2
end
-- PEXPIRE first: it is not refused at maxmemory, and once a script has
-- written Redis lets it finish, so a holder can extend under noeviction.
-- The keys live as long as the longest lease, this one's old or new.
local deadline = now + tonumber(ARGV[2])
local ms = math.max(rw_last({leases = KEYS[1]}), deadline) - now
redis.call('PEXPIRE', KEYS[1], ms)
redis.call('PEXPIRE', KEYS[2], ms)
redis.call('ZADD', KEYS[1], deadline, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ms) -- the HSET may have made the hash: a reader without an Owner has none
return 1
