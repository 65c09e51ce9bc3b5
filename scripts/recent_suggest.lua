-- recent_suggest: the items of a recent list that match a query, ignoring
-- ASCII case, in three tiers (exact, prefix, then suffix and contains
-- merged): items equal to the query, then items that start with it, then
-- items that contain it elsewhere; each tier most recent first; at most the
-- limit in all. The book's fetch_autocomplete_list ships the whole list to
-- the client and filters there; this filters on the server.
-- KEYS[1] list
-- ARGV[1] query, ARGV[2] limit (>= 1)
-- reply: the matching items.
--
-- The items are folded and searched as one string, so an item the query
-- does not occur in costs no Lua step of its own; a match that runs across
-- two items is no match. string.lower folds A-Z alone in Redis (the C
-- locale); a Lua host that folds Unicode too (miniredis) folds through a
-- table of A-Z instead.
local items = redis.call('LRANGE', KEYS[1], 0, -1)
local limit = tonumber(ARGV[2])
local out = {}
if ARGV[1] == '' then -- every item starts with the empty query
  for i = 1, math.min(limit, #items) do
    out[i] = items[i]
  end
  return out
end
local fold = string.lower
if fold('\195\133') ~= '\195\133' then
  local lower = {}
  for b = 65, 90 do
    lower[string.char(b)] = string.char(b + 32)
  end
  fold = function(s) return (string.gsub(s, '[A-Z]', lower)) end
end
local query, all = fold(ARGV[1]), fold(table.concat(items))
local n = #query
local exact, prefix, inside = {}, {}, {}
local i, first, last = 0, 1, 0 -- item i spans all[first..last]
while i < #items do
  local at = string.find(all, query, last + 1, true)
  if not at then break end
  repeat
    i = i + 1
    first, last = last + 1, last + #items[i]
  until last >= at
  if at + n - 1 <= last then
    if at > first then
      inside[#inside + 1] = items[i]
    elseif last - first + 1 > n then
      prefix[#prefix + 1] = items[i]
    else
      exact[#exact + 1] = items[i]
      if #exact >= limit then break end -- no later item outranks these
    end
  end
end
for _, tier in ipairs({exact, prefix, inside}) do
  for _, item in ipairs(tier) do
    if #out >= limit then return out end
    out[#out + 1] = item
  end
end
return out
