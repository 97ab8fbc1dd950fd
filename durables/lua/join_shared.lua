#!lua flags=allow-oom
-- An idle consumer of a shared durable joins the waiters (lib/settle.lua), first in its
-- wait's pipeline: it reads its door next. Woken to watch at once if watchers are wanted
-- and it is the first waiting in the ring.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's ring list
-- KEYS[3]  the durable's redo list
-- KEYS[4]  the durable's taps hash
-- KEYS[5]  the durable's waits hash
-- KEYS[6]  the caller's tap
-- KEYS[7]  the caller's door
-- KEYS[8]  the durable's redelivery counts
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the calling consumer's id
-- ARGV[3]  how long its reads may block, in milliseconds
-- ARGV[4]  how many of the ids were dealt with a redelivery count (they come first)
-- ARGV[5..] the ids it acknowledges: only while its door is open (a detached member's
--          doors are closed before its events are dealt again, and XACK does not check
--          the holder); else they go through the dispatcher with its next fetch
-- Returns  1 if it waits, 0 if its door was closed (or events wait to be dealt again):
--          its reads fail at once, and it fetches through the dispatcher next. The ids
--          are acknowledged if and only if it returns 1.
-- Errors   none of its own.
--@include members
--@include settle
--@include acks
local d = {stream = KEYS[1], ring = KEYS[2], redo = KEYS[3], taps = KEYS[4], waits = KEYS[5],
  group = ARGV[1]}
local me, tap, door = ARGV[2], KEYS[6], KEYS[7]
local ttl_ms = tonumber(ARGV[3]) + 1000  -- as fetch_shared.lua's TAP_GRACE_MS
if redis.call('PEXPIRE', door, ttl_ms) == 0 or redis.call('LLEN', d.redo) > 0 then
  set_tap(d, door, me, false, 0)
  set_tap(d, tap, me, false, 0)
  redis.call('HDEL', d.waits, me)
  return 0
end
ack_ids(d.stream, d.group, KEYS[8], 4)
local marks = redis.call('HGETALL', d.waits)  -- read once: its own, and the others' (watch)
for i = 1, #marks, 2 do
  if marks[i] == me then  -- watching on (settle_shared.lua), or given events (lib/settle.lua)
    return 1  -- rung already
  end
end
redis.call('HSET', d.waits, me, DOORBELL)
marks[#marks + 1], marks[#marks + 2] = me, DOORBELL
watch(d, tap, door, me, ttl_ms, nil, nil, marks)
return 1
