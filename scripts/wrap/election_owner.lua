-- election_owner (prologue): a proclamation's (scripts/wrap/election.lua):
-- the leader's value, ARGV[2], is stored after how many times it
-- proclaimed one in its term (lib/election.lua's el_proclaim).
-- This header, up to the blank line, is not sent.

ARGV[2] = el_proclaim(KEYS[1], ARGV[2])
