-- market_list: list_item (listing 4.4) as one script, in the shape of
-- Redis in Action chapter 11. Test code only: the marketplace benchmark.
-- KEYS[1] seller's inventory, KEYS[2] market
-- ARGV[1] item id, ARGV[2] market member (item.seller), ARGV[3] price
-- reply: 1 if listed, 0 if the seller does not have the item.
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
  redis.call('SREM', KEYS[1], ARGV[1])
  return 1
end
return 0
