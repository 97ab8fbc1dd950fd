#!lua flags=allow-oom
-- The dispatcher of shared, serial and keyed durables, run at each fetch of an attached consumer:
-- renew the caller's lease, acknowledge what it finished, reap consumers whose lease lapsed,
-- then deal waiting events round robin to the attached consumers that have window room
-- (lib/deal.lua). Serial durables deal nothing while anything dealt is unacknowledged, and
-- then deal to one consumer only (the caller first). Keyed durables deal by key
-- (lib/keyed.lua), through the pool only. The caller reads its own pending
-- events right after, in the same pipeline (XREADGROUP ... 0), so payloads never pass
-- through Lua; then new events straight from the channel through its taps, if this script
-- opened one (lib/members.lua): the steady path, with no pool, no XCLAIM and no bell.
-- Shared durables first settle what watchers took (lib/settle.lua), and open an idle
-- caller's door, so its next wait is one pipeline of its own and no script of this size.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's durables hash (name -> spec JSON with 'kind', 'ast', 'max_deliveries')
-- KEYS[3]  the durable's members hash (consumer id -> {"w": window, "ast": own filter};
--          '_store' -> {"ast": store filter, "by": consumer id, "version": n}, Universal Messaging's shared durables)
-- KEYS[4]  the durable's alive zset (consumer id -> lease expiry, server ms)
-- KEYS[5]  the durable's ring list
-- KEYS[6]  the durable's redo list
-- KEYS[7]  the durable's delayed zset
-- KEYS[8]  the durable's redelivery counts
-- KEYS[9]  the durable's bell stream
-- KEYS[10] the durable's dead-letter stream
-- KEYS[11] the durable's taps hash (tap key -> consumer id)
-- KEYS[12] the caller's tap: a serial durable's while the line is the caller's; a shared
--          durable's for one read, when the caller alone has room (lib/deal.lua, deal_first),
--          or while it watches (lib/settle.lua)
-- KEYS[13] the durable's waits hash (lib/settle.lua)
-- KEYS[14] the caller's door (shared: opened when it may join the waiters, lib/settle.lua;
--          keyed: the caller's own bell, lib/watch.lua)
-- KEYS[15] the durable's tally (counters for the metrics: 'redelivered')
-- KEYS[16] the durable's holds (keyed: which event of each key is out, lib/keyed.lua)
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the calling consumer's id
-- ARGV[3]  lease length in milliseconds
-- ARGV[4]  how many events the caller holds, handed out and not acknowledged
-- ARGV[5]  serial durables: how many events the caller's last read through its tap took
--          (the ring turns past it); shared ones: 1 if the caller reads through its tap
--          right after this script (it does while busy), 2 if it would join the waiters
--          when nothing comes (it is idle and asks blocking), else 0; keyed ones: 2 if it
--          would wait when nothing comes (lib/watch.lua), else 0
-- ARGV[6]  how long the caller's read through a tap may block, in milliseconds (a tap
--          opened lives that long and TAP_GRACE_MS more; each read through it renews it)
-- ARGV[7..] ids the caller acknowledges
-- Returns  {newest stream id (the last possible id when a serial durable's line is taken:
--          the caller waits for the bell alone), newest bell id ('0-0' for none), {id, count, ...} of the
--          caller's pending events delivered before, how many were dead-lettered now,
--          store filter version (0: none), consumer that set it ('' for none),
--          1 if the caller's tap is open to read, 2 if its door is (shared: it may join
--          the waiters, lib/settle.lua), else 0}; keyed durables: 3 there if the caller
--          watches (lib/watch.lua; else it waits for its own bell alone: the newest ids
--          are the last possible one), then the newest id of the caller's own bell.
-- Errors   DETACHED (the caller's lease lapsed and it was reaped), NODURABLE; NOGROUP
--          (Redis's own) if the spec is there but the group is gone.
--@include clock
--@include ids
--@include pool
--@include selector
--@include members
--@include reap
--@include dead_letters
--@include deal
--@include settle
--@include fields
--@include holds
--@include keyed
--@include watch
local d = {
  stream = KEYS[1], members = KEYS[3], alive = KEYS[4], ring = KEYS[5], redo = KEYS[6],
  delayed = KEYS[7], counts = KEYS[8], bell = KEYS[9], dead = KEYS[10], taps = KEYS[11],
  waits = KEYS[13], tally = KEYS[15], holds = KEYS[16], group = ARGV[1],
}
local TAP_GRACE_MS = 1000
local me = ARGV[2]
local handed, block_ms = tonumber(ARGV[4]), tonumber(ARGV[6])
local now = now_ms()

if not renew_member(d, me, ARGV[3], now) then
  return redis.error_reply('DETACHED this consumer lost its lease and was detached')
end
-- The caller's acknowledgements, behind the lease check: XACK does not check the owner, so
-- a plain XACK from a consumer detached meanwhile would take an event dealt again to
-- another member out of the dispatcher's sight while that member still holds it (a
-- serial durable deals on, a window overfills). Passed here, the ids cost the server
-- about 1,750 instructions per event of a batch of 100, against a plain XACK before the
-- script (measured, and left so).
if #ARGV >= 7 then
  redis.call('XACK', d.stream, d.group, unpack(ARGV, 7))
  if redis.call('EXISTS', d.counts) == 1 then  -- passing the ids again costs ~0.2 µs each
    redis.call('HDEL', d.counts, unpack(ARGV, 7))
  end
end
local raw_spec = redis.call('HGET', KEYS[2], d.group)
if not raw_spec then
  return redis.error_reply('NODURABLE the durable does not exist')
end
local spec = cjson.decode(raw_spec)
local store = store_filter(d)
if spec['kind'] == 'keyed' and #ARGV >= 7 then
  keyed_acked(d, {unpack(ARGV, 7)})  -- their keys are free for their next events
end

reap(d, now)  -- lapsed consumers' events and due rollbacks go back first in line
local order, room, total, busy, filters, held = rooms(d)
local taps = live_taps(d)
local serial, keyed = spec['kind'] == 'serial', spec['kind'] == 'keyed'
local marked = false  -- some member waits (lib/settle.lua)
local watcher, waiters
if keyed then
  redis.call('HDEL', d.waits, me)  -- fetching: its wait, if any, is over (lib/watch.lua)
  watcher, waiters = keyed_waiters(d, me, now)
elseif not serial then  -- (a keyed durable opens no doors: its idle members wait as lib/watch.lua says)
  local settled
  settled, marked = settle(d, order, room, filters, taps, KEYS[14], me)  -- events watchers took
  if settled then
    order, room, total, busy, filters, held = rooms(d)
  end
  if marked then
    redis.call('HDEL', d.waits, me)  -- fetching: its wait, if any, is over
  end
end
local mine_taps = taps[me]
taps[me] = nil  -- the caller's own: decided again below
local took, tapping, waiting = 0, false, false  -- ARGV[5], as the durable's kind reads it
if serial then
  took = tonumber(ARGV[5])
else
  tapping, waiting = ARGV[5] == '1', ARGV[5] == '2'
end
if took > 0 then  -- its tap dealt to it: the ring turns past it
  order = turn_past(d, order, me)
end
if serial then
  busy = busy or next(taps) ~= nil  -- another member reads new events through its tap
  total = serial_room(order, room, busy)
end
local mine = room[me] or 0
-- The caller may read new events itself when that is exactly what dealing would do.
local plain = not keyed and mine > 0 and (held[me] or 0) == handed and filter_tree(spec['ast']) == nil
  and filter_tree(store['ast']) == nil and redis.call('LLEN', d.redo) == 0
  and redis.call('ZCARD', d.delayed) == 0
for _, consumer in ipairs(order) do
  plain = plain and filters[consumer] == nil
end
local full, buried, watching = false, 0, nil
if keyed then
  local _, dealt
  _, buried, dealt = deal_keyed(d, me, spec, store, order, room, filters, taps, total)
  watching = keyed_wait(d, me, watcher, waiters, dealt,
    waiting and block_ms > 0 and (room[me] or 0) > 0 and not dealt[me], now, block_ms + TAP_GRACE_MS)
elseif plain and serial and not busy then
  full = true
elseif plain and tapping and mine >= 2 and total == mine then
  full = deal_first(d, me, order)
else
  if total > 0 and #order > 0 then  -- room to deal into
    if not deal_direct(d, me, spec, store, order, room, filters, serial, taps) then
      local picks
      picks, buried = pick(d, spec, store, total)
      if #picks > 0 and deal(d, me, order, room, filters, picks, serial, taps) then
        ring_bell(d.bell)  -- others got events: wake them
      end
    end
  end
end
local newest = newest_id(d.stream)
-- An idle caller with room left may join the waiters (lib/settle.lua) when nothing but
-- new events can come to it.
local wait = waiting and not keyed and block_ms > 0 and (room[me] or 0) > 0 and filter_tree(spec['ast']) == nil
  and filter_tree(store['ast']) == nil and redis.call('LLEN', d.redo) == 0
  and redis.call('ZCARD', d.delayed) == 0
for _, consumer in ipairs(order) do
  wait = wait and filters[consumer] == nil
end
set_tap(d, KEYS[12], me, full, block_ms + TAP_GRACE_MS, listed(mine_taps, KEYS[12]))
if not serial and not keyed then
  set_tap(d, KEYS[14], me, wait, block_ms + TAP_GRACE_MS, listed(mine_taps, KEYS[14]))  -- door
  if marked then  -- else nobody waits to be woken to watch
    watch(d, KEYS[12], KEYS[14], me, block_ms + TAP_GRACE_MS)
  end
end

local redelivered = redelivered_of(d.stream, d.group, d.counts, me)
if serial and busy and not full then
  -- The line is taken (another member reads through its tap, or what was dealt is not
  -- acknowledged yet): new events are not the caller's to wake for, which cost a whole
  -- fetch per published event for every other member. The bell rings when events are
  -- dealt or handed back and at a release; a holder that just stops asking is noticed
  -- when the caller's wait ends (block time).
  newest = LAST_ID
end
local rung = newest_id(d.bell)
if keyed then
  if watching == false then  -- it waits for its own bell alone
    newest, rung = LAST_ID, LAST_ID
  end
  return {newest, rung, redelivered, buried, store['version'], store['by'],
    watching and 3 or 0, newest_id(KEYS[14])}
end
return {newest, rung, redelivered, buried, store['version'], store['by'],
  full and 1 or (wait and 2 or 0)}
