-- election_leader: read an election's state. Writes nothing.
-- KEYS[1] lock, KEYS[2] fence counter
-- reply: the state, "!term pttl keylen key owner" (lib/election.lua).
return el_state(KEYS[1], KEYS[2])
