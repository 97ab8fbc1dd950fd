-- Take the lease of an exclusive durable; on a fresh attach, count the pending
-- events that will be delivered again (except those rolled back or never handed out).
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's durables hash
-- KEYS[3]  the durable's lease
-- KEYS[4]  the durable's redelivery counts (hash id -> count)
-- KEYS[5]  the durable's keep set (ids whose count must not rise)
-- ARGV[1]  durable name
-- ARGV[2]  the new holder's token
-- ARGV[3]  lease length in milliseconds
-- Returns  the redelivery counts as a flat list: id, count, id, count...
-- Errors   NODURABLE, INUSE <holder token>.
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  return redis.error_reply('NODURABLE the durable does not exist')
end
local holder = redis.call('GET', KEYS[3])
if holder and holder ~= ARGV[2] then
  return redis.error_reply('INUSE ' .. holder)
end
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3])
if not holder then
  local start = '-'
  repeat
    local pending = redis.call('XPENDING', KEYS[1], ARGV[1], start, '+', 1000)
    for _, entry in ipairs(pending) do
      if redis.call('SISMEMBER', KEYS[5], entry[1]) == 0 then
        redis.call('HINCRBY', KEYS[4], entry[1], 1)
      end
    end
    if #pending > 0 then
      start = '(' .. pending[#pending][1]
    end
  until #pending < 1000
  redis.call('DEL', KEYS[5])
end
return redis.call('HGETALL', KEYS[4])
