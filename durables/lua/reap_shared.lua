-- Housekeeping for a shared or serial durable nobody is fetching from: detach consumers
-- whose lease lapsed (their events go back first in line, one delivery more) and move
-- due delayed rollbacks into the line.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's members hash
-- KEYS[3]  the durable's alive zset
-- KEYS[4]  the durable's ring list
-- KEYS[5]  the durable's redo list
-- KEYS[6]  the durable's delayed zset
-- KEYS[7]  the durable's redelivery counts
-- ARGV[1]  durable name (the group)
-- Returns  1.
--@include ids
--@include pool
--@include reap
reap(KEYS[1], ARGV[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], now_ms())
return 1
