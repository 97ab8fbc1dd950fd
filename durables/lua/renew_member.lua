-- Extend an attached consumer's lease if it is still a member (not reaped as dead).
-- KEYS[1]  the durable's members hash
-- KEYS[2]  the durable's alive zset
-- ARGV[1]  consumer id
-- ARGV[2]  lease length in milliseconds
-- Returns  1 renewed, 0 the consumer is no longer attached.
--@include pool
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('ZADD', KEYS[2], now_ms() + tonumber(ARGV[2]), ARGV[1])
return 1
