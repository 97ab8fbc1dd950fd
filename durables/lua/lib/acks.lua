-- Library (`--@include acks`): a shared or serial consumer's acknowledgements as its
-- scripts take them: ARGV[at] says how many of the ids after it were dealt with a
-- redelivery count (those come first, and only their counts are dropped), ARGV[at + 1..]
-- are the ids. Called only behind the script's check that the events are still the
-- caller's (a member, an open tap or door): XACK does not check who holds an event.
local function ack_ids(stream, group, counts, at)
  if #ARGV <= at then
    return
  end
  redis.call('XACK', stream, group, unpack(ARGV, at + 1))
  local counted = tonumber(ARGV[at])
  if counted > 0 then
    redis.call('HDEL', counts, unpack(ARGV, at + 1, at + counted))
  end
end
