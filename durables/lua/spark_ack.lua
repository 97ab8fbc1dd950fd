-- Acknowledge a durable up to an id, whichever of its consumers holds the events: Spark
-- has committed every batch up to it. Their redelivery bookkeeping goes with them.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's redelivery counts
-- KEYS[3]  the durable's keep set
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the id up to which (inclusive) to acknowledge
-- ARGV[3]  '1': then acknowledge whatever is still pending up to ARGV[2]; '0': only ARGV[4..]
-- ARGV[4..] ids to acknowledge first, all up to ARGV[2]: those the plans handed out. Given
--          them, nothing is left for the sweep (an XPENDING that finds nothing), whose
--          entries cost more to move through Lua than the acknowledgements themselves.
-- Returns  how many events were acknowledged.
-- Errors   NOGROUP.
local stream, group, acked = KEYS[1], ARGV[1], 0
-- (each id passed to a command costs Lua time: the bookkeeping usually does not exist)
local counted, kept = redis.call('EXISTS', KEYS[2]) == 1, redis.call('EXISTS', KEYS[3]) == 1
for first = 4, #ARGV, 1000 do
  local last = math.min(first + 999, #ARGV)
  acked = acked + redis.call('XACK', stream, group, unpack(ARGV, first, last))
  if counted then
    redis.call('HDEL', KEYS[2], unpack(ARGV, first, last))
  end
  if kept then
    redis.call('SREM', KEYS[3], unpack(ARGV, first, last))
  end
end
if ARGV[3] ~= '1' then
  return acked
end
repeat
  local pending = redis.call('XPENDING', stream, group, '-', ARGV[2], 1000)
  if #pending == 0 then
    break
  end
  local ids = {}
  for i, entry in ipairs(pending) do
    ids[i] = entry[1]
  end
  acked = acked + redis.call('XACK', stream, group, unpack(ids))
  if counted then
    redis.call('HDEL', KEYS[2], unpack(ids))
  end
  if kept then
    redis.call('SREM', KEYS[3], unpack(ids))
  end
until #pending < 1000
return acked
