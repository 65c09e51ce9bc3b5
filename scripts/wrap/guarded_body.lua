-- guarded_body (wrapper): the caller's Lua of a guarded script, after its
-- prologue (guarded_lock or guarded_writer), goes in at "-- (body)" as a
-- function run with the caller's own KEYS and ARGV: the guard's key and
-- token taken off the front. Its reply is the script's.
-- This header, up to the blank line, is not sent.

local keys, argv = {}, {}
for i = 2, #KEYS do keys[i - 1] = KEYS[i] end
for i = 2, #ARGV do argv[i - 1] = ARGV[i] end
local function body(KEYS, ARGV)
-- (body)
end
return body(keys, argv)
