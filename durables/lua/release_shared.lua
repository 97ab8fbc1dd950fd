-- Detach a consumer from a shared or serial durable: everything it holds goes back
-- first in line; events it had handed to the application count one more delivery.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's members hash
-- KEYS[3]  the durable's alive zset
-- KEYS[4]  the durable's ring list
-- KEYS[5]  the durable's redo list
-- KEYS[6]  the durable's redelivery counts
-- KEYS[7]  the durable's bell stream
-- ARGV[1]  durable name (the group)
-- ARGV[2]  consumer id
-- ARGV[3..] ids handed to the application and not acknowledged
-- Returns  how many events went back.
--@include ids
--@include pool
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
local back = claim(stream, group, POOL, pending_of(stream, group, me))
local handed = {}
for i = 3, #ARGV do
  handed[ARGV[i]] = true
end
for _, id in ipairs(back) do
  if handed[id] then
    redis.call('HINCRBY', KEYS[6], id, 1)
  end
end
push_front(KEYS[5], sort_ids(back))
redis.call('HDEL', KEYS[2], me)
redis.call('ZREM', KEYS[3], me)
redis.call('LREM', KEYS[4], 0, me)
redis.call('XGROUP', 'DELCONSUMER', stream, group, me)
if redis.call('HLEN', KEYS[2]) == 1 then
  redis.call('HDEL', KEYS[2], '_store')  -- the last consumer left: the next first one decides
end
if #back > 0 then
  redis.call('XADD', KEYS[7], 'MAXLEN', 1, '*', 'r', 1)
end
return #back
