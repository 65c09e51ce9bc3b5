-- h_join: a design measured, not the library's: a waiter's queue join in
-- design h (h_acquire): the holding, the abandon mark, the queue's tail and
-- the token's entry read in one HMGET, the clock, the entry ('e:<n>':
-- token, deadline, engine, arrival) and its index by token ('k:<token>')
-- written in one HSET; a free name taken as h_acquire does.
-- KEYS[1] the name's hash; ARGV[1] token, ARGV[2] lease in ms, ARGV[3]
-- retention in ms, ARGV[4] engine id
-- reply: {1, fence} if taken (or handed over), {2} if abandoned, {0, -1,
-- rank, 1} if queued
local tok = ARGV[1]
local s = redis.call('HMGET', KEYS[1], 'v', 'q', 'x:' .. tok, 't', 'k:' .. tok)
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local holder, fence, e = string.match(s[1] or '', '^(%S+) (%d+) (%d+)')
if holder == tok then return {1, tonumber(fence)} end
if s[3] then return {2} end
if holder and holder ~= '-' and tonumber(e) > now then
  if s[5] then return {0, -1, 1, 0} end
  local n = (tonumber(s[4]) or 0) + 1
  redis.call('HSET', KEYS[1], 't', n, 'q', (tonumber(s[2]) or 0) + 1,
    'e:' .. n, tok .. ' ' .. string.format('%d', now + ARGV[2]) .. ' ' .. ARGV[4] .. ' ' .. t[1] .. t[2], 'k:' .. tok, n)
  return {0, -1, n, 1}
end
local f = holder and tonumber(fence) + 1 or t[1] * 1000000 + t[2]
redis.call('HSET', KEYS[1], 'v', tok .. ' ' .. string.format('%d', f) .. ' ' .. string.format('%d', now + ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, f}
