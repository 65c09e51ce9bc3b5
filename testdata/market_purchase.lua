-- market_purchase: purchase_item (listing 4.5) as one script, in the shape
-- of Redis in Action chapter 11. Test code only: the marketplace benchmark.
-- KEYS[1] buyer, KEYS[2] seller, KEYS[3] market, KEYS[4] buyer's inventory
-- ARGV[1] market member (item.seller), ARGV[2] item id, ARGV[3] price seen
-- reply: 1 if bought, 0 if the item is gone, repriced or unaffordable.
local price = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[1]))
local funds = tonumber(redis.call('HGET', KEYS[1], 'funds'))
if price and funds and price == tonumber(ARGV[3]) and funds >= price then
  redis.call('HINCRBY', KEYS[1], 'funds', -price)
  redis.call('HINCRBY', KEYS[2], 'funds', price)
  redis.call('SADD', KEYS[4], ARGV[2])
  redis.call('ZREM', KEYS[3], ARGV[1])
  return 1
end
return 0
