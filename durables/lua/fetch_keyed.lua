#!lua flags=allow-oom
-- The dispatcher of a keyed durable, run at each fetch of an attached consumer:
-- fetch_shared.lua's work, with KEYS, ARGV and the reply as it describes them, for a
-- durable that deals by key (lib/keyed.lua), through the pool only. An idle caller that
-- asks blocking watches the channel for the others or waits for its own bell
-- (lib/watch.lua): 3 in the reply's seventh place if it watches (else it waits for its own
-- bell alone, and the newest ids are the last possible one), then the newest id of its
-- own bell.
--@include clock
--@include key_hash
--@include ids
--@include pool
--@include selector
--@include members
--@include reap
--@include dispatch
--@include dead_letters
--@include deal
--@include fields
--@include holds
--@include keyed
--@include watch
local d = fetch_keys()
local me = ARGV[2]
local block_ms = tonumber(ARGV[6])
local spec, now = fetch_begin(d, 'keyed')
if not spec then
  return now  -- refused
end
if #ARGV >= 7 then
  keyed_acked(d, {unpack(ARGV, 7)})  -- their keys are free for their next events
end

local order, room, total, _, filters, _, hashes, store = rooms(d)
local taps = {}  -- a keyed durable's members read through no tap
local watcher, waiters = keyed_waiters(d, me, now)  -- its own wait, if any, is over
local _, buried, dealt = deal_keyed(d, me, spec, store, order, room, filters, taps, total,
  hashes)
local watching = keyed_wait(d, me, watcher, waiters, dealt,
  ARGV[5] == '2' and block_ms > 0 and (room[me] or 0) > 0 and not dealt[me], now,
  block_ms + TAP_GRACE_MS)
local newest = newest_id(d.stream)
local redelivered = redelivered_of(d.stream, d.group, d.counts, me, d.counted)
local rung = newest_id(d.bell)
if watching == false then  -- it waits for its own bell alone
  newest, rung = LAST_ID, LAST_ID
end
return {newest, rung, redelivered, buried, store['version'], store['by'], watching and 3 or 0,
  newest_id(KEYS[14])}
