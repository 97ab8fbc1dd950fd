#!lua flags=allow-oom
-- A consumer that stops asking while it watches on (settle_shared.lua returned 2, or a
-- keyed durable's fetch 3) leaves the waiters, so another waiting member is woken to watch
-- instead of it.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's ring list
-- KEYS[3]  the durable's taps hash
-- KEYS[4]  the durable's waits hash
-- KEYS[5]  the caller's tap
-- KEYS[6]  the caller's door
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the calling consumer's id
-- ARGV[3]  how long a woken watcher's read may block, in milliseconds
-- ARGV[4]  'keyed' for a keyed durable's watcher (lib/watch.lua: another waiting member is
--          rung to take the watch over), else ''
-- Returns  1 if it was still marked, else 0.
-- Errors   none of its own.
--@include clock
--@include ids
--@include members
--@include settle
--@include watch
local d = {stream = KEYS[1], ring = KEYS[2], taps = KEYS[3], waits = KEYS[4], group = ARGV[1]}
local me, tap, door = ARGV[2], KEYS[5], KEYS[6]
if ARGV[4] == 'keyed' then
  local marked, now = redis.call('HDEL', d.waits, me), now_ms()
  local watcher, waiting = keyed_waiters(d, me, now)
  keyed_wait(d, me, watcher, waiting, {}, false, now, 0)
  return marked
end
set_tap(d, tap, me, false, 0)
if redis.call('HDEL', d.waits, me) == 0 then
  return 0
end
watch(d, tap, door, me, tonumber(ARGV[3]) + 1000)
return 1
