-- election_acquire (prologue): a campaign's, before the lock's value is
-- read (scripts/wrap/election.lua): the guard writes, so the queue's, the
-- waiters' and the counter's types are read first; then el_guard
-- (lib/election.lua) holds the first term after a lost counter back one
-- lease. ARGV[4] the lease in ms, ARGV[5] the fence retention in ms (as
-- lock_acquire's).
-- This header, up to the blank line, is not sent.

redis.call('ZCARD', KEYS[3])
redis.call('HLEN', KEYS[4])
local _, el_err = counter_read(KEYS[2])
if el_err then return el_err end
el_guard(KEYS[1], KEYS[2], tonumber(ARGV[4]), ARGV[5])
