-- A shared or serial consumer's acknowledgements sent on their own (`ack()`, `commit()`,
-- the flusher), behind the membership check: XACK does not check which consumer holds an
-- event, and a consumer detached for a lapsed lease (paused, say) has had its events
-- dealt again; its late XACK would take them out of the dispatcher's sight while their
-- new holder still works on them (a serial durable would deal on, a window overfill).
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's members hash
-- KEYS[3]  the durable's redelivery counts
-- KEYS[4]  the durable's bell stream (rung: window room wakes the waiters)
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the calling consumer's id
-- ARGV[3]  how many of the ids were dealt with a redelivery count (they come first)
-- ARGV[4..] the ids it acknowledges
-- Returns  1 if acknowledged, 0 if the caller is not a member (nothing acknowledged).
-- Errors   none of its own.
--@include acks
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 then
  return 0
end
ack_ids(KEYS[1], ARGV[1], KEYS[3], 3)
redis.call('XADD', KEYS[4], 'MAXLEN', '~', 1, '*', 'a', 1)
return 1
