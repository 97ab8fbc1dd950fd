#!lua flags=allow-oom
-- Hand events back to a shared or serial durable: first in line (or after a delay),
-- each with its redelivery count raised by one.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's redo list
-- KEYS[3]  the durable's delayed zset
-- KEYS[4]  the durable's redelivery counts
-- KEYS[5]  the durable's bell stream
-- KEYS[6]  the durable's taps hash (reads through a tap wake, to be dealt these first)
-- KEYS[7]  the durable's tally (counters for the metrics: 'redelivered')
-- ARGV[1]  durable name (the group)
-- ARGV[2]  consumer id handing them back
-- ARGV[3]  delay in milliseconds (0: at once)
-- ARGV[4]  n, how many ids are handed back
-- ARGV[5..4+n] the ids
-- ARGV[5+n] '1' if the caller reads ahead (a serial holder): then every other event it
--          holds and has not handed to its application (read ahead: the ids after this
--          one are those it handed out and keeps) goes back first in line too, uncounted,
--          so the events handed back come before those read after them.
-- Returns  how many were handed back (ids the consumer no longer held are skipped).
-- Errors   NOGROUP (Redis's own) if the durable's group is gone.
--@include clock
--@include ids
--@include pool
--@include members
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
local n = tonumber(ARGV[4])
local mine = {}
for i = 5, 4 + n do
  local entry = redis.call('XPENDING', stream, group, ARGV[i], ARGV[i], 1, me)
  if #entry > 0 then
    mine[#mine + 1] = ARGV[i]
  end
end
local ahead, reads_ahead = {}, ARGV[5 + n] == '1'
if reads_ahead then
  local kept = {}
  for i = 5, #ARGV do  -- the ids handed back are not read ahead either
    kept[ARGV[i]] = true
  end
  for _, id in ipairs(pending_of(stream, group, me)) do
    if not kept[id] then
      ahead[#ahead + 1] = id
    end
  end
end
local delay = tonumber(ARGV[3])
if reads_ahead or (delay <= 0 and #mine > 0) then
  -- The taps (keys not in KEYS) before any write: while a cluster moves the slot, one
  -- already moved stops the script here, and it is sent again unchanged. A holder that
  -- reads ahead has its taps closed whatever the delay: a read ahead still to run reads
  -- nothing after this.
  wake_taps(KEYS[6])
end
if #mine == 0 and #ahead == 0 then
  return 0
end
local moved = sort_ids(claim(stream, group, POOL, mine))
for _, id in ipairs(moved) do
  redis.call('HINCRBY', KEYS[4], id, 1)
end
if #moved > 0 then
  redis.call('HINCRBY', KEYS[7], 'redelivered', #moved)
end
local back = claim(stream, group, POOL, ahead)  -- read ahead: due at once, uncounted
if delay > 0 then
  local due = now_ms() + delay
  for _, id in ipairs(moved) do
    redis.call('ZADD', KEYS[3], due, id)
  end
else
  for _, id in ipairs(moved) do
    back[#back + 1] = id
  end
end
push_front(KEYS[2], sort_ids(back))
ring_bell(KEYS[5])
return #moved
