-- Library (`--@include deal`, after `selector`, `pool`, `members` and `dead_letters`): the
-- dealing of a shared or serial durable. Waiting events (handed back ones first, then new
-- ones the durable's filter and the store filter accept) go round robin to the members with
-- room in their window, each to the next one in the ring whose own filter takes it. Serial
-- durables deal in order, to one member at a time.
-- Functions take `d` as in members.lua (with d.redo, d.counts, d.dead as in reap.lua and
-- dead_letters.lua), `me` (the fetching consumer), the durable's decoded `spec` ('ast',
-- 'max_deliveries'), the `store` filter (store_filter(d)) and what rooms(d) returned:
-- `order` (the ring), `room` (consumer -> room left) and `filters` (consumer -> tree or nil),
-- and the listed `taps` (listed_taps(d)): a member that gets events here loses its taps.
-- Serial durables deal to the fetching member first when it has room (it keeps the line
-- while it asks; no hand-over), else to the next in the ring.
local SCAN_LIMIT = 5000

-- The fields of the events read in this run, by id: read at most once, and only when a
-- filter needs them.
local fields_of = {}

-- True if the event passes `tree` (nil: no filter, everything passes).
local function wanted(stream, tree, id)
  if tree == nil then
    return true
  end
  if fields_of[id] == nil then
    local entry = redis.call('XRANGE', stream, id, id)
    fields_of[id] = entry[1] and entry[1][2] or {}
  end
  return selector.matches(tree, selector.fields(fields_of[id]))
end

-- True if nothing divides the dealing: no filter anywhere (the durable's, the store's, a
-- member's) and nothing handed back or delayed waiting. New events then go, in order, to
-- whoever has room, so a member may read them itself (a tap, a wait at its door).
local function undivided(d, spec, store, order, filters)
  if filter_tree(spec['ast']) ~= nil or filter_tree(store['ast']) ~= nil
      or redis.call('LLEN', d.redo) > 0
      or (d.delayed_n or redis.call('ZCARD', d.delayed)) > 0 then  -- reap counted them
    return false
  end
  for _, consumer in ipairs(order) do
    if filters[consumer] ~= nil then
      return false
    end
  end
  return true
end

-- The serial rule: nothing new while anything dealt is unacknowledged (`busy`), and then
-- no more than one member can take.
local function serial_room(order, room, busy)
  local most = 0
  if not busy then
    for _, consumer in ipairs(order) do
      most = math.max(most, room[consumer])
    end
  end
  return most
end

-- Up to `want` events to deal: handed-back ones first (those past max_deliveries are buried
-- instead), then new ones the durable's filter and the store filter (Universal Messaging's shared durables) accept; the
-- rest are acknowledged and dropped. Returns the picks and how many were buried.
local function pick(d, spec, store, want)
  local picks, buried, limit = {}, 0, tonumber(spec['max_deliveries'])
  while #picks < want do
    local id = redis.call('LPOP', d.redo)
    if not id then
      break
    end
    if bury(d, limit, id) then
      buried = buried + 1
    else
      picks[#picks + 1] = id
    end
  end
  local durable_tree, store_tree = filter_tree(spec['ast']), filter_tree(store['ast'])
  local scanned = 0
  while #picks < want and scanned < SCAN_LIMIT do
    local got = redis.call('XREADGROUP', 'GROUP', d.group, POOL, 'COUNT', want - #picks,
      'STREAMS', d.stream, '>')
    if not got then
      break
    end
    local skipped = {}
    for _, entry in ipairs(got[1][2]) do
      scanned = scanned + 1
      fields_of[entry[1]] = entry[2]
      if wanted(d.stream, durable_tree, entry[1]) and wanted(d.stream, store_tree, entry[1]) then
        picks[#picks + 1] = entry[1]
      else
        skipped[#skipped + 1] = entry[1]
      end
    end
    if #skipped > 0 then
      redis.call('XACK', d.stream, d.group, unpack(skipped))
    end
  end
  return picks, buried
end

-- The index of the next member from `at` in the ring with room whose own filter takes the event.
local function taker(stream, order, room, filters, at, id)
  local n = #order
  for tries = 0, n - 1 do
    local i = (at - 1 + tries) % n + 1
    local consumer = order[i]
    if room[consumer] > 0 and wanted(stream, filters[consumer], id) then
      return i
    end
  end
  return nil
end

-- The index of `me` in the ring if it has room (serial: it goes first), else 1.
local function serial_start(order, room, me)
  for i, consumer in ipairs(order) do
    if consumer == me and room[me] > 0 then
      return i
    end
  end
  return 1
end

-- Give each member the events dealt to it (`dealt`: consumer -> ids); a member that gets
-- events loses its taps. True if others than `me` got any.
local function hand_out(d, me, dealt, taps)
  local others = false
  for consumer, ids in pairs(dealt) do
    close_taps(d, taps, consumer)
    claim(d.stream, d.group, consumer, ids)
    others = others or consumer ~= me
  end
  return others
end

-- Deal picks round robin from the head of the ring; the ring turns past the last served.
-- Serial durables deal in order to one member (the caller first) and stop at the first
-- event it cannot take. Events nobody can take now go back first in line. True if others
-- than `me` got any.
local function deal(d, me, order, room, filters, picks, serial, taps)
  local dealt, left, at, only = {}, {}, 1, nil
  if serial then
    at = serial_start(order, room, me)
  end
  for _, id in ipairs(picks) do
    local i = nil
    if serial and only then
      if room[order[only]] > 0 and #left == 0 and wanted(d.stream, filters[order[only]], id) then
        i = only
      end
    elseif #left == 0 or not serial then
      i = taker(d.stream, order, room, filters, at, id)
      only = i
    end
    if i == nil then
      left[#left + 1] = id
    else
      local consumer = order[i]
      dealt[consumer] = dealt[consumer] or {}
      table.insert(dealt[consumer], id)
      room[consumer] = room[consumer] - 1
      at = i % #order + 1
    end
  end
  push_front(d.redo, left)
  local others = hand_out(d, me, dealt, taps)
  turn_ring(d, order, at)
  return others
end

-- The common case, cheaply: no filter anywhere, nothing handed back waiting, and one member
-- only to deal to (the others' windows are full, or the durable is serial). New events then
-- go straight to it with one XREADGROUP, with no pool and no XCLAIM. True if that settled
-- the dealing (nothing or all dealt), false if pick and deal must do it.
local function deal_direct(d, me, spec, store, order, room, filters, serial, taps)
  if spec['ast'] ~= nil and spec['ast'] ~= cjson.null then
    return false
  end
  if filter_tree(store['ast']) ~= nil or redis.call('LLEN', d.redo) > 0 then
    return false
  end
  local only = nil
  if serial and room[me] and room[me] > 0 then
    only = serial_start(order, room, me)
  end
  for i, consumer in ipairs(order) do
    if room[consumer] > 0 then
      if only ~= nil and not serial then
        return false
      end
      if only == nil then
        only = i
      end
    end
  end
  if only == nil or filters[order[only]] ~= nil then
    return only == nil
  end
  local consumer = order[only]
  local got = redis.call('XREADGROUP', 'GROUP', d.group, consumer, 'COUNT', room[consumer],
    'STREAMS', d.stream, '>')
  if got and #got[1][2] > 0 then
    room[consumer] = room[consumer] - #got[1][2]
    close_taps(d, taps, consumer)
    turn_ring(d, order, only % #order + 1)
    if consumer ~= me then
      ring_bell(d.bell)
    end
  end
  return true
end

-- Deal what waits into the members' room, `total` in all: straight from the channel when
-- nothing divides the dealing (deal_direct), else picked (handed-back events first) and
-- dealt round robin, the members given events woken by the bell. Returns how many events
-- were dead-lettered.
local function deal_waiting(d, me, spec, store, order, room, filters, serial, taps, total)
  if total <= 0 or #order == 0
      or deal_direct(d, me, spec, store, order, room, filters, serial, taps) then
    return 0
  end
  local picks, buried = pick(d, spec, store, total)
  if #picks > 0 and deal(d, me, order, room, filters, picks, serial, taps) then
    ring_bell(d.bell)  -- others got events: wake them
  end
  return buried
end

-- A shared durable whose caller alone has room, with no filter and nothing handed back
-- or delayed (what deal_direct would read to it): one new event is dealt here, which says
-- whether there is anything to read and turns the ring past the caller, and the caller
-- reads the rest of its room itself, through its tap, right after this script in the same
-- round trip (its pipeline runs in one go), so the events' fields never pass through Lua,
-- which cost the server as much as the read itself. True if the tap is to be opened.
local function deal_first(d, me, order)
  local got = redis.call('XREADGROUP', 'GROUP', d.group, me, 'COUNT', 1, 'STREAMS', d.stream, '>')
  if not got or #got[1][2] == 0 then
    return false
  end
  turn_past(d, order, me)
  return true
end
