#!lua flags=allow-oom
-- Housekeeping for a shared or serial durable nobody is fetching from: detach consumers
-- whose lease lapsed (their events go back first in line, one delivery more), move due
-- delayed rollbacks into the line, and hand back the events of orphans (consumers of the
-- group that are no members, idle past the orphan ttl).
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's members hash
-- KEYS[3]  the durable's alive zset
-- KEYS[4]  the durable's ring list
-- KEYS[5]  the durable's redo list
-- KEYS[6]  the durable's delayed zset
-- KEYS[7]  the durable's redelivery counts
-- KEYS[8]  the durable's taps hash (a detached consumer's taps close)
-- KEYS[9]  the durable's tally (counters for the metrics: 'redelivered')
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the orphan ttl in milliseconds
-- Returns  how many orphaned events were handed back.
-- Errors   none of its own.
--@include clock
--@include ids
--@include pool
--@include members
--@include reap
local d = {
  stream = KEYS[1], members = KEYS[2], alive = KEYS[3], ring = KEYS[4], redo = KEYS[5],
  delayed = KEYS[6], counts = KEYS[7], taps = KEYS[8], tally = KEYS[9], group = ARGV[1],
}
reap(d, now_ms())
return reap_orphans(d, tonumber(ARGV[2]))
