-- The dispatcher of shared and serial durables, run at each fetch of an attached consumer:
-- renew the caller's lease, acknowledge what it finished, reap consumers whose lease lapsed,
-- then deal waiting events round robin to the attached consumers that have window room
-- (lib/deal.lua). Serial durables deal nothing while anything dealt is unacknowledged, and
-- then deal to one consumer only. The caller reads its own pending events right after, in
-- the same pipeline (XREADGROUP ... 0), so payloads never pass through Lua.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's durables hash (name -> spec JSON with 'kind', 'ast', 'max_deliveries')
-- KEYS[3]  the durable's members hash (consumer id -> {"w": window, "ast": own filter};
--          '_store' -> {"ast": store filter, "by": consumer id, "version": n}, seed 004)
-- KEYS[4]  the durable's alive zset (consumer id -> lease expiry, server ms)
-- KEYS[5]  the durable's ring list
-- KEYS[6]  the durable's redo list
-- KEYS[7]  the durable's delayed zset
-- KEYS[8]  the durable's redelivery counts
-- KEYS[9]  the durable's bell stream
-- KEYS[10] the durable's dead-letter stream
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the calling consumer's id
-- ARGV[3]  lease length in milliseconds
-- ARGV[4..] ids the caller acknowledges
-- Returns  {newest stream id, newest bell id ('0-0' for none), {id, count, ...} of the
--          caller's pending events delivered before, how many were dead-lettered now,
--          store filter version (0: none), consumer that set it ('' for none)}.
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
local d = {
  stream = KEYS[1], members = KEYS[3], alive = KEYS[4], ring = KEYS[5], redo = KEYS[6],
  delayed = KEYS[7], counts = KEYS[8], bell = KEYS[9], dead = KEYS[10], group = ARGV[1],
}
local me = ARGV[2]
local now = now_ms()

if not renew_member(d, me, ARGV[3], now) then
  return redis.error_reply('DETACHED this consumer lost its lease and was detached')
end
if #ARGV >= 4 then  -- the caller's acknowledgements
  redis.call('XACK', d.stream, d.group, unpack(ARGV, 4))
  redis.call('HDEL', d.counts, unpack(ARGV, 4))
end
local raw_spec = redis.call('HGET', KEYS[2], d.group)
if not raw_spec then
  return redis.error_reply('NODURABLE the durable does not exist')
end
local spec = cjson.decode(raw_spec)
local store = store_filter(d)

reap(d, now)  -- lapsed consumers' events and due rollbacks go back first in line
local order, room, total, busy, filters = rooms(d)
local serial = spec['kind'] == 'serial'
if serial then
  total = serial_room(order, room, busy)
end
local buried = 0
if total > 0 and #order > 0 then  -- room to deal into
  if not deal_direct(d, me, spec, store, order, room, filters, serial) then
    local picks
    picks, buried = pick(d, spec, store, total)
    if #picks > 0 and deal(d, me, order, room, filters, picks, serial) then
      ring_bell(d.bell)  -- others got events: wake them
    end
  end
end

local redelivered = redelivered_of(d.stream, d.group, d.counts, me)
return {newest_id(d.stream), newest_id(d.bell), redelivered, buried, store['version'], store['by']}
