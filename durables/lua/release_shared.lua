#!lua flags=allow-oom
-- Detach a consumer from a shared or serial durable: everything it holds goes back
-- first in line; events it had handed to the application count one more delivery.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's members hash
-- KEYS[3]  the durable's alive zset
-- KEYS[4]  the durable's ring list
-- KEYS[5]  the durable's redo list
-- KEYS[6]  the durable's redelivery counts
-- KEYS[7]  the durable's bell stream
-- KEYS[8]  the durable's taps hash (reads through a tap wake, to be dealt these first)
-- KEYS[9]  the durable's tally (counters for the metrics: 'redelivered')
-- ARGV[1]  durable name (the group)
-- ARGV[2]  consumer id
-- ARGV[3..] ids handed to the application and not acknowledged
-- Returns  how many events went back.
-- Errors   NOGROUP (Redis's own) if the durable's group is gone.
--@include clock
--@include ids
--@include pool
--@include members
local d = {
  stream = KEYS[1], members = KEYS[2], alive = KEYS[3], ring = KEYS[4], redo = KEYS[5],
  counts = KEYS[6], bell = KEYS[7], group = ARGV[1],
}
local me = ARGV[2]
local back = claim(d.stream, d.group, POOL, pending_of(d.stream, d.group, me))
local handed = {}
for i = 3, #ARGV do
  handed[ARGV[i]] = true
end
local redelivered = 0
for _, id in ipairs(back) do
  if handed[id] then
    redis.call('HINCRBY', d.counts, id, 1)
    redelivered = redelivered + 1
  end
end
if redelivered > 0 then
  redis.call('HINCRBY', KEYS[9], 'redelivered', redelivered)
end
push_front(d.redo, sort_ids(back))
remove_member(d, me)
if #back > 0 then
  ring_bell(d.bell)
  wake_taps(KEYS[8])
end
return #back
