#!lua flags=allow-oom
-- The holder of an exclusive durable proves it still holds the lease (and renews it),
-- then acknowledges cumulatively: every event it has pending up to and including an id.
-- Sent alone, or pipelined before the holder's next XREADGROUP: a holder whose lease
-- lapsed gets LEASELOST and must stop (what it read stays pending for the next holder).
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's lease
-- KEYS[3]  the durable's redelivery counts
-- KEYS[4]  the durable's keep set
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the holder's token (its consumer name)
-- ARGV[3]  lease length in milliseconds
-- ARGV[4]  the id up to which (inclusive) to acknowledge
-- ARGV[5..] ids the holder read up to it since its last acknowledgement (a hint: any it
--          does not name are found in its pending list)
-- Returns  how many events were acknowledged.
-- Errors   LEASELOST; NOGROUP (Redis's own) if the durable's group is gone.
--@include cumulative
if redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return redis.error_reply('LEASELOST the lease of this exclusive durable has lapsed')
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return ack_upto(KEYS[1], ARGV[1], ARGV[2], KEYS[3], KEYS[4], ARGV[4], ARGV, 5)
