-- Attach a consumer to a shared or serial durable: it joins the round-robin ring last.
-- A consumer with a filter makes it the durable's store filter from now on (seed 004):
-- only events it matches are kept for the durable; earlier consumers keep their own.
-- KEYS[1]  the channel's durables hash
-- KEYS[2]  the durable's members hash (consumer id -> {"w": window, "ast": filter tree};
--          field '_store' -> {"ast": store filter, "by": consumer id, "version": n})
-- KEYS[3]  the durable's alive zset (consumer id -> lease expiry, server ms)
-- KEYS[4]  the durable's ring list
-- ARGV[1]  durable name
-- ARGV[2]  consumer id
-- ARGV[3]  window: most unacknowledged events this consumer may hold
-- ARGV[4]  lease length in milliseconds
-- ARGV[5]  the consumer's filter tree as JSON, or '' for none
-- Returns  the store filter's version as this consumer sees it.
-- Errors   NODURABLE.
--@include pool
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return redis.error_reply('NODURABLE the durable does not exist')
end
local tree = cjson.null
if ARGV[5] ~= '' then
  tree = cjson.decode(ARGV[5])
end
redis.call('HSET', KEYS[2], ARGV[2], cjson.encode({w = tonumber(ARGV[3]), ast = tree}))
redis.call('ZADD', KEYS[3], now_ms() + tonumber(ARGV[4]), ARGV[2])
redis.call('LREM', KEYS[4], 0, ARGV[2])
redis.call('RPUSH', KEYS[4], ARGV[2])
local raw = redis.call('HGET', KEYS[2], '_store')
local version = 0
if raw then
  version = cjson.decode(raw)['version']
end
if ARGV[5] ~= '' then
  version = version + 1
  redis.call('HSET', KEYS[2], '_store', cjson.encode({ast = tree, by = ARGV[2], version = version}))
end
return version
