#!lua flags=allow-oom
-- The dispatcher of a serial durable, run at each fetch of an attached consumer that is not
-- reading through its tap: fetch_shared.lua's work, with KEYS, ARGV and the reply as it
-- describes them, for a durable that deals nothing while anything dealt is unacknowledged,
-- and then to one consumer only (the caller first). While the line is the caller's, its tap
-- stays open and it reads new events itself, with no script (lib/members.lua).
--@include clock
--@include ids
--@include pool
--@include selector
--@include members
--@include reap
--@include dispatch
--@include dead_letters
--@include deal
local d = fetch_keys()
local me = ARGV[2]
local handed, took, block_ms = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local spec, now = fetch_begin(d, 'serial')
if not spec then
  return now  -- refused
end

local order, room, _, busy, filters, held, _, store = rooms(d)
local taps = listed_taps(d)
local mine_taps = taps[me]
taps[me] = nil  -- the caller's own: decided again below
if took > 0 then  -- its tap dealt to it: the ring turns past it
  order = turn_past(d, order, me)
end
busy = busy or open_taps(d, taps)  -- another member reads new events through its tap
local total = serial_room(order, room, busy)
local mine = room[me] or 0
-- The caller reads new events itself, through its tap, when that is exactly what dealing
-- would do: the line is free and nothing divides the dealing.
local full = not busy and mine > 0 and (held[me] or 0) == handed
  and undivided(d, spec, store, order, filters)
local buried = 0
if not full then
  buried = deal_waiting(d, me, spec, store, order, room, filters, true, taps, total)
end
local newest = newest_id(d.stream)
set_tap(d, KEYS[12], me, full, block_ms + TAP_GRACE_MS, listed(mine_taps, KEYS[12]))
local redelivered = redelivered_of(d.stream, d.group, d.counts, me, d.counted)
if busy and not full then
  -- The line is taken (another member reads through its tap, or what was dealt is not
  -- acknowledged yet): new events are not the caller's to wake for, which cost a whole
  -- fetch per published event for every other member. The bell rings when events are
  -- dealt or handed back and at a release; a holder that just stops asking is noticed
  -- when the caller's wait ends (block time).
  newest = LAST_ID
end
local rung = newest_id(d.bell)
return {newest, rung, redelivered, buried, store['version'], store['by'], full and 1 or 0}
