-- clocked (wrapper): a script run by a history test's engine
-- (linear_test.go), which must know when the server decided what it
-- answers: a lease runs out by the server's clock. The script, with its
-- libraries, goes in at "-- (script)" as the function ck_body, unchanged;
-- the reply is {the server's clock in ms when the script began, the
-- script's reply}. A key's expiry in a script is decided by the script's
-- start, which TIME here reads. Not sent by a user's engine.
-- This header, up to the blank line, is not sent.

local function ck_body()
-- (script)
end
local ck_t = redis.call('TIME')
local ck_now = tonumber(ck_t[1]) * 1000 + math.floor(tonumber(ck_t[2]) / 1000)
return {ck_now, ck_body()}
