#!lua flags=allow-oom
-- A serial consumer's steady fetch (no dispatcher): its tap renewed, and its
-- acknowledgements made only while the tap is open. Whatever detaches a member closes its
-- taps (lib/reap.lua) before its events are dealt again, so an open tap says they are
-- still its own: a plain XACK would acknowledge them even after they went to another
-- member (XACK does not check the holder), which then holds them out of the dispatcher's
-- sight and the line passes on before it is done.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the caller's tap
-- KEYS[3]  the durable's redelivery counts
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the tap's time to live, in milliseconds
-- ARGV[3]  how many of the ids were dealt with a redelivery count (they come first)
-- ARGV[4..] the ids the caller acknowledges
-- Returns  1 if the tap was open (renewed, ids acknowledged), else 0 (nothing acknowledged:
--          they go through the dispatcher, fetch_shared.lua).
-- Errors   none of its own.
--@include acks
if redis.call('PEXPIRE', KEYS[2], ARGV[2]) == 0 then
  return 0
end
ack_ids(KEYS[1], ARGV[1], KEYS[3], 3)
return 1
