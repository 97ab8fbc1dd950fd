#!lua flags=allow-oom
-- The dispatcher of a shared durable, run at each fetch of an attached consumer: renew the
-- caller's lease, acknowledge what it finished, reap consumers whose lease lapsed, settle
-- what watchers took (lib/settle.lua), then deal waiting events round robin to the attached
-- consumers that have window room (lib/deal.lua). The caller reads its own pending events
-- right after, in the same pipeline (XREADGROUP ... 0), so payloads never pass through Lua;
-- then new events straight from the channel through its tap, if this script opened one
-- (lib/members.lua): the steady path, with no pool, no XCLAIM and no bell. An idle caller's
-- door is opened, so its next wait is one pipeline of its own and no script of this size.
-- Serial and keyed durables have scripts of their own (fetch_serial.lua, fetch_keyed.lua),
-- with the same KEYS, ARGV and reply, so that each run defines only what its kind calls.
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
-- Errors   DETACHED (the caller's lease lapsed and it was reaped), NODURABLE (also when the
--          durable was deleted and made again as another kind); NOGROUP
--          (Redis's own) if the spec is there but the group is gone.
--@include clock
--@include ids
--@include pool
--@include selector
--@include members
--@include reap
--@include dispatch
--@include dead_letters
--@include deal
--@include settle
local d = fetch_keys()
local me = ARGV[2]
local handed, block_ms = tonumber(ARGV[4]), tonumber(ARGV[6])
local spec, now = fetch_begin(d, 'shared')
if not spec then
  return now  -- refused
end

local order, room, total, busy, filters, held, _, store = rooms(d)
local taps = listed_taps(d)
local settled, marked = settle(d, order, room, filters, taps, KEYS[14], me)  -- events watchers took
if settled then
  order, room, total, busy, filters, held = rooms(d)
end
if marked then  -- some member waits
  redis.call('HDEL', d.waits, me)  -- fetching: its wait, if any, is over
end
local mine_taps = taps[me]
taps[me] = nil  -- the caller's own: decided again below
local tapping, waiting = ARGV[5] == '1', ARGV[5] == '2'
local mine = room[me] or 0
-- The caller may read new events itself when that is exactly what dealing would do.
local plain = mine > 0 and (held[me] or 0) == handed and undivided(d, spec, store, order, filters)
local full, buried = false, 0
if plain and tapping and mine >= 2 and total == mine then
  full = deal_first(d, me, order)
else
  buried = deal_waiting(d, me, spec, store, order, room, filters, false, taps, total)
end
local newest = newest_id(d.stream)
-- An idle caller with room left may join the waiters (lib/settle.lua) when nothing but
-- new events can come to it.
local wait = waiting and block_ms > 0 and (room[me] or 0) > 0
  and undivided(d, spec, store, order, filters)
set_tap(d, KEYS[12], me, full, block_ms + TAP_GRACE_MS, listed(mine_taps, KEYS[12]))
set_tap(d, KEYS[14], me, wait, block_ms + TAP_GRACE_MS, listed(mine_taps, KEYS[14]))  -- door
if marked then  -- else nobody waits to be woken to watch
  watch(d, KEYS[12], KEYS[14], me, block_ms + TAP_GRACE_MS)
end
local redelivered = redelivered_of(d.stream, d.group, d.counts, me, d.counted)
local rung = newest_id(d.bell)
return {newest, rung, redelivered, buried, store['version'],
  store['by'], full and 1 or (wait and 2 or 0)}
