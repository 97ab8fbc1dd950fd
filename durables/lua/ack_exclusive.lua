-- Cumulative acknowledgement: ack every pending event of an exclusive durable up to
-- and including an id, and forget their redelivery bookkeeping.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's lease
-- KEYS[3]  the durable's redelivery counts
-- KEYS[4]  the durable's keep set
-- ARGV[1]  durable name
-- ARGV[2]  the holder's token
-- ARGV[3]  the id up to which (inclusive) to acknowledge
-- Returns  how many events were acknowledged.
-- Errors   LEASELOST.
if redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return redis.error_reply('LEASELOST the lease of this exclusive durable has lapsed')
end
local acked = 0
repeat
  local pending = redis.call('XPENDING', KEYS[1], ARGV[1], '-', ARGV[3], 1000)
  if #pending == 0 then
    break
  end
  local ids = {}
  for i, entry in ipairs(pending) do
    ids[i] = entry[1]
  end
  acked = acked + redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
  redis.call('HDEL', KEYS[3], unpack(ids))
  redis.call('SREM', KEYS[4], unpack(ids))
until #pending < 1000
return acked
