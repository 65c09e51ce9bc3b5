-- recent_suggest: the items of a recent list that start with a prefix,
-- ignoring ASCII case, most recent first. The book's
-- fetch_autocomplete_list ships the whole list to the client and filters
-- there; this filters on the server and returns at most the limit.
-- KEYS[1] list
-- ARGV[1] prefix, ARGV[2] limit (>= 1)
-- reply: the matching items.
--
-- Case is folded byte by byte for A-Z only: string.lower follows the C
-- locale in Redis but Unicode in other Lua hosts, so it is not used.
local items = redis.call('LRANGE', KEYS[1], 0, -1)
local prefix, limit = ARGV[1], tonumber(ARGV[2])
local n = #prefix
local want = {}
for i = 1, n do
  local b = string.byte(prefix, i)
  if b >= 65 and b <= 90 then b = b + 32 end
  want[i] = b
end
local out = {}
for _, item in ipairs(items) do
  if #item >= n then
    local match = true
    for i = 1, n do
      local b = string.byte(item, i)
      if b >= 65 and b <= 90 then b = b + 32 end
      if b ~= want[i] then
        match = false
        break
      end
    end
    if match then
      out[#out + 1] = item
      if #out >= limit then break end
    end
  end
end
return out
