#!lua flags=allow-oom
-- Last script of an idle consumer's wait (lib/settle.lua), right behind its read of the
-- channel through its tap, in the same pipeline: its wait is over. Woken to watch, it
-- settles what it took and the next watcher is woken; the common case costs a dozen
-- calls (it was the head of the ring and the only one to take an event since it was
-- woken: the ring turns past it). Anything else settles as the dispatcher does.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's members hash
-- KEYS[3]  the durable's alive zset
-- KEYS[4]  the durable's ring list
-- KEYS[5]  the durable's redo list
-- KEYS[6]  the durable's delayed zset
-- KEYS[7]  the durable's redelivery counts
-- KEYS[8]  the durable's bell stream
-- KEYS[9]  the durable's taps hash
-- KEYS[10] the durable's waits hash
-- KEYS[11] the caller's tap
-- KEYS[12] the caller's door
-- KEYS[13] the durable's tally (counters for the metrics: 'redelivered')
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the calling consumer's id
-- ARGV[3]  how long a wait may block, in milliseconds
-- Returns  {1 if the caller may wait again without the dispatcher (it was woken to watch,
--          its door is open, and nothing waits to be dealt again or was left unread), 2
--          the same and it watches on (what it took went to the head of the ring, and it is
--          the head now), else 0; {id, count, ...} of the caller's pending events delivered
--          before}: the read of its pending list right behind brings them (events the
--          dispatcher dealt it while it waited: handed back, or a lapsed member's), and
--          they must come flagged as redelivered.
-- Errors   none of its own.
--@include clock
--@include ids
--@include pool
--@include selector
--@include members
--@include reap
--@include dead_letters
--@include deal
--@include settle
local d = {
  stream = KEYS[1], members = KEYS[2], alive = KEYS[3], ring = KEYS[4], redo = KEYS[5],
  delayed = KEYS[6], counts = KEYS[7], bell = KEYS[8], taps = KEYS[9], waits = KEYS[10],
  tally = KEYS[13], group = ARGV[1],
}
local me, tap, door = ARGV[2], KEYS[11], KEYS[12]
local ttl_ms = tonumber(ARGV[3]) + 1000  -- as fetch_shared.lua's TAP_GRACE_MS

reap(d, now_ms())  -- lapsed consumers' events and due rollbacks go back first in line
local since = redis.call('HGET', d.waits, me)
if since == GIVEN then
  since = nil  -- dealt events by another's take: its door was rung, it reads them now
end
local watched = since and since ~= DOORBELL
local settled = false
if watched then
  -- watchers earlier in the ring took earlier events and settled them first: their reads
  -- were served first, and the server runs the rest of their pipelines first too
  local taken = redis.call('XPENDING', d.stream, d.group, '(' .. since, '+', 2, me)
  if #taken == 1 then  -- turned past it, as if dealt to it, if it is the head (the usual)
    settled = redis.call('LMOVE', d.ring, d.ring, 'LEFT', 'RIGHT') == me
    if not settled then
      redis.call('LMOVE', d.ring, d.ring, 'RIGHT', 'LEFT')  -- it was not: as it was
    end
  end
end
if watched and not settled then
  local order, room, _, _, filters = rooms(d)
  settle(d, order, room, filters, listed_taps(d), door, me)
end
redis.call('HDEL', d.waits, me)
local read = read_mark(d)
-- More came than the watchers took (the channel has an event newer than any held): the
-- dispatcher deals them (in batches, round robin). So it does, finding nothing to deal,
-- when the newest event read was acknowledged already.
local behind = watched and id_before(read, newest_id(d.stream))
local open = not behind and redis.call('PEXPIRE', door, ttl_ms) == 1
  and redis.call('LLEN', d.redo) == 0
-- Woken to watch, it took nothing itself (what it took went to the head of the ring, or
-- its read ended) and it is the head now: it watches on, or the next one woken would be
-- the one after it, and so on at every event.
local again = open and watched and not settled and redis.call('LINDEX', d.ring, 0) == me
  and #redis.call('XPENDING', d.stream, d.group, '(' .. since, '+', 1, me) == 0
  and redis.call('PEXPIRE', tap, ttl_ms) == 1
if again then
  redis.call('HSET', d.waits, me, read)
  redis.call('XADD', door, 'MAXLEN', 1, '*', 'w', 1)  -- its next read of the door returns
end
-- only watchers read the channel: the caller's tap goes to the next one (or closes)
watch(d, tap, door, me, ttl_ms, read, not again and tap or nil)  -- nothing dealt since read
-- Only a consumer dealt events by another's call can have them in its pending list
-- unread: dealing closes its taps and door, which takes its waiter's mark too (no `since`).
local redelivered = since and {} or redelivered_of(d.stream, d.group, d.counts, me)
-- Its door read ended without a wake (or it was never woken): it fetches through the
-- dispatcher once, which deals whatever waits, so a watcher that died watching (its mark
-- lasts until its tap expires) holds nothing up longer than a wait.
if not open or since == DOORBELL then
  return {0, redelivered}
end
return {again and 2 or 1, redelivered}
