-- Attach a consumer to a shared or serial durable: it joins the round-robin ring last.
-- KEYS[1]  the channel's durables hash
-- KEYS[2]  the durable's members hash (consumer id -> window)
-- KEYS[3]  the durable's alive zset (consumer id -> lease expiry, server ms)
-- KEYS[4]  the durable's ring list
-- ARGV[1]  durable name
-- ARGV[2]  consumer id
-- ARGV[3]  window: most unacknowledged events this consumer may hold
-- ARGV[4]  lease length in milliseconds
-- Returns  1.
-- Errors   NODURABLE.
--@include pool
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return redis.error_reply('NODURABLE the durable does not exist')
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[3], now_ms() + tonumber(ARGV[4]), ARGV[2])
redis.call('LREM', KEYS[4], 0, ARGV[2])
redis.call('RPUSH', KEYS[4], ARGV[2])
return 1
