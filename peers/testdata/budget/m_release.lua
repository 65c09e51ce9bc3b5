-- m_release: m_acquire's release: the string's holding checked, "- fence"
-- written in its place for the rest of the lease (KEEPTTL); no string
-- (none, or a flagged hash) goes to the slow path.
-- KEYS[1] lock; ARGV[1] token, ARGV[2] wake prefix, ARGV[3] engine id
-- reply: 1 if released, 0 if not held
local v = redis.call('MGET', KEYS[1])[1]
local t = ARGV[1]
if v and string.sub(v, 1, #t + 1) == t .. ' ' then
  local e = string.find(v, ' ', #t + 2, true)
  if redis.pcall('SET', KEYS[1], '- ' .. string.sub(v, #t + 2, e - 1), 'KEEPTTL').err then
    redis.call('DEL', KEYS[1]) -- refused at maxmemory
  end
  return 1
end
return 0
