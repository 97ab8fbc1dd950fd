-- Delete a durable: its consumer group, spec, lease and redelivery bookkeeping.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's durables hash
-- KEYS[3..] the durable's own keys (lease, redelivery counts, keep set)
-- ARGV[1]  durable name
-- Returns  1 if it existed, else 0.
if redis.call('HDEL', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.pcall('XGROUP', 'DESTROY', KEYS[1], ARGV[1])
for i = 3, #KEYS do
  redis.call('DEL', KEYS[i])
end
return 1
