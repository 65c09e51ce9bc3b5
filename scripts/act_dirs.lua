-- act_dirs: the tries of one partition of a group's activity in some
-- periods.
-- KEYS[1..n] the partition's directories, one per period
-- reply: for each period, its directory as HGETALL gives it (field, value,
--   ...: nodes 's', 's0', 's1' or 'd', counts 'c<node>', the cursors of
--   shards whose bitmaps are being built 'v<node>', the deadline
--   't', the count of buckets 'b', the dense shards 'D'), or 0 for a
--   period without one; or, for a directory that counts no bucket ('b' is
--   0: every id is in a dense shard), '*' and its dense shards ('D': their
--   nodes, separated by spaces), whose paths are the rest of its trie.
--   (The engine picks the nodes: a loop here over the fields cost more
--   than the rest of the script.)
local out = {}
for i = 1, #KEYS do
  local got = redis.call('HMGET', KEYS[i], 'b', 'D')
  if got[1] == '0' then
    out[i] = {'*', got[2] or ''}
  else
    local all = redis.call('HGETALL', KEYS[i])
    if #all == 0 then
      out[i] = 0
    else
      out[i] = all
    end
  end
end
return out
