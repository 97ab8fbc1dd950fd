#!lua flags=allow-oom
-- A shared or serial consumer's acknowledgements sent on their own (`ack()`, `commit()`,
-- the flusher), behind the membership check: XACK does not check which consumer holds an
-- event, and a consumer detached for a lapsed lease (paused, say) has had its events
-- dealt again; its late XACK would take them out of the dispatcher's sight while their
-- new holder still works on them (a serial durable would deal on, a window overfill).
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's members hash
-- KEYS[3]  the durable's redelivery counts
-- KEYS[4]  the durable's bell stream, named only when the acknowledgements may free what a
--          blocked fetch waits for (a serial line, a full window, a keyed durable's keys):
--          it rings then
-- KEYS[5]  a keyed durable's holds (lib/holds.lua): the keys acknowledged are free
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the calling consumer's id
-- ARGV[3]  the token of the attachment the acknowledgements were made under (hex): one
--          sent from another thread while the consumer attached again (detached
--          meanwhile, so its events were dealt again) must not count either
-- ARGV[4]  how many of the ids were dealt with a redelivery count (they come first)
-- ARGV[5..] the ids it acknowledges
-- Returns  1 if acknowledged; 0 if the caller is not a member, -1 if it attached again
--          since (nothing acknowledged either way).
-- Errors   none of its own.
--@include acks
--@include holds
local member = redis.call('HGET', KEYS[2], ARGV[2])
if not member then
  return 0
end
if not string.find(member, '"t":"' .. ARGV[3] .. '"', 1, true) then
  return -1
end
ack_ids(KEYS[1], ARGV[1], KEYS[3], 4)
if KEYS[5] and #ARGV > 4 then
  keyed_acked({holds = KEYS[5]}, {unpack(ARGV, 5)})
end
if KEYS[4] then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', 1, '*', 'a', 1)
end
return 1
