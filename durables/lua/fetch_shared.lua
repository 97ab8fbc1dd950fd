-- The dispatcher of shared and serial durables, run at each fetch of an attached consumer:
-- acknowledge what the caller finished, reap consumers whose lease lapsed, then deal
-- waiting events round robin to the attached consumers that have window room. Serial
-- durables deal nothing while anything dealt is unacknowledged, and then deal to one
-- consumer only. The caller reads its own pending events right after, in the same
-- pipeline (XREADGROUP ... 0), so payloads never pass through Lua.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's durables hash (name -> spec JSON with 'ast', 'max_deliveries')
-- KEYS[3]  the durable's members hash (consumer id -> {"w": window, "ast": own filter};
--          '_store' -> {"ast": store filter, "by": consumer id, "version": n}, seed 004)
-- KEYS[4]  the durable's alive zset
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
-- Returns  {newest stream id, newest bell id, {id, count, ...} of the caller's redelivered
--          pending events, dead-lettered now, store filter version, consumer that set it}.
-- Errors   DETACHED (the caller's lease lapsed and it was reaped), NODURABLE.
--@include ids
--@include pool
--@include selector
--@include reap
local stream, durables, members, alive, ring, redo, delayed, counts, bell, dead =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local group, me = ARGV[1], ARGV[2]
local now = now_ms()
local SCAN_LIMIT = 5000

if redis.call('HEXISTS', members, me) == 0 then
  return redis.error_reply('DETACHED this consumer lost its lease and was detached')
end
redis.call('ZADD', alive, now + tonumber(ARGV[3]), me)
if #ARGV >= 4 then
  local done = {unpack(ARGV, 4)}
  redis.call('XACK', stream, group, unpack(done))
  redis.call('HDEL', counts, unpack(done))
end
local raw_spec = redis.call('HGET', durables, group)
if not raw_spec then
  return redis.error_reply('NODURABLE the durable does not exist')
end
local spec = cjson.decode(raw_spec)

local function tree_or_nil(tree)
  if tree == nil or tree == cjson.null then
    return nil
  end
  return tree
end

local store = {version = 0, by = ''}
local raw_store = redis.call('HGET', members, '_store')
if raw_store then
  store = cjson.decode(raw_store)
end

-- Room left in each member's window, in ring order.
local function rooms()
  local order = redis.call('LRANGE', ring, 0, -1)
  local windows, filters = {}, {}
  local flat = redis.call('HGETALL', members)
  for i = 1, #flat, 2 do
    if flat[i] ~= '_store' then
      local member = cjson.decode(flat[i + 1])
      windows[flat[i]] = member['w']
      filters[flat[i]] = tree_or_nil(member['ast'])
    end
  end
  local held, busy = {}, false
  for _, pair in ipairs(redis.call('XPENDING', stream, group)[4] or {}) do
    held[pair[1]] = tonumber(pair[2])
    if pair[1] ~= POOL then
      busy = true
    end
  end
  local room, total = {}, 0
  for _, consumer in ipairs(order) do
    room[consumer] = math.max(0, (windows[consumer] or 0) - (held[consumer] or 0))
    total = total + room[consumer]
  end
  return order, room, total, busy, filters
end

-- A redo event past max_deliveries goes to the dead letters instead; true if it went.
local function bury(id)
  local limit = tonumber(spec['max_deliveries'])
  local count = tonumber(redis.call('HGET', counts, id) or 0)
  if limit == nil or count < limit then
    return false
  end
  local entry = redis.call('XRANGE', stream, id, id)
  if #entry > 0 then
    local fields = entry[1][2]
    fields[#fields + 1] = 'origin'
    fields[#fields + 1] = id
    fields[#fields + 1] = 'reason'
    fields[#fields + 1] = 'max_deliveries'
    fields[#fields + 1] = 'deliveries'
    fields[#fields + 1] = tostring(count)
    redis.call('XADD', dead, '*', unpack(fields))
  end
  redis.call('XACK', stream, group, id)
  redis.call('HDEL', counts, id)
  return true
end

-- The fields of an event (only needed when consumers have filters of their own).
local fields_of = {}
local function fields(id)
  if fields_of[id] == nil then
    local entry = redis.call('XRANGE', stream, id, id)
    fields_of[id] = entry[1] and entry[1][2] or {}
  end
  return fields_of[id]
end

local function wanted(tree, id)
  return tree == nil or selector.matches(tree, selector.fields(fields(id)))
end

-- Up to `want` events to deal: handed-back ones first, then new ones that the durable's
-- filter and the store filter (seed 004) accept; the rest are acknowledged and dropped.
local function pick(want)
  local picks, buried = {}, 0
  while #picks < want do
    local id = redis.call('LPOP', redo)
    if not id then
      break
    end
    if bury(id) then
      buried = buried + 1
    else
      picks[#picks + 1] = id
    end
  end
  local durable_tree, store_tree = tree_or_nil(spec['ast']), tree_or_nil(store['ast'])
  local scanned = 0
  while #picks < want and scanned < SCAN_LIMIT do
    local got = redis.call('XREADGROUP', 'GROUP', group, POOL, 'COUNT', want - #picks,
      'STREAMS', stream, '>')
    if not got then
      break
    end
    local skipped = {}
    for _, entry in ipairs(got[1][2]) do
      scanned = scanned + 1
      fields_of[entry[1]] = entry[2]
      if wanted(durable_tree, entry[1]) and wanted(store_tree, entry[1]) then
        picks[#picks + 1] = entry[1]
      else
        skipped[#skipped + 1] = entry[1]
      end
    end
    if #skipped > 0 then
      redis.call('XACK', stream, group, unpack(skipped))
    end
  end
  return picks, buried
end

-- The next consumer from `at` in the ring with room whose own filter takes the event.
local function taker(order, room, filters, at, id)
  local n = #order
  for tries = 0, n - 1 do
    local i = (at - 1 + tries) % n + 1
    local consumer = order[i]
    if room[consumer] > 0 and wanted(filters[consumer], id) then
      return i
    end
  end
  return nil
end

-- Deal picks round robin from the head of the ring; the ring turns past the last served.
-- Serial durables deal in order to one consumer and stop at the first event it cannot
-- take. Events nobody can take now go back first in line.
local function deal(order, room, filters, picks, serial)
  local dealt, left, at, only = {}, {}, 1, nil
  for _, id in ipairs(picks) do
    local i = nil
    if serial and only then
      if room[order[only]] > 0 and #left == 0 and wanted(filters[order[only]], id) then
        i = only
      end
    elseif #left == 0 or not serial then
      i = taker(order, room, filters, at, id)
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
  push_front(redo, left)
  local others = false
  for consumer, ids in pairs(dealt) do
    claim(stream, group, consumer, ids)
    others = others or consumer ~= me
  end
  if at ~= 1 then
    redis.call('DEL', ring)
    redis.call('RPUSH', ring, unpack(order, at))
    redis.call('RPUSH', ring, unpack(order, 1, at - 1))
  end
  return others
end

-- The common case, cheaply: no filter anywhere, nothing handed back waiting, and one
-- consumer only to deal to (the others' windows are full, or the durable is serial). New
-- events then go straight to it with one XREADGROUP, with no pool and no XCLAIM.
local function deal_direct(order, room, filters, serial)
  if spec['ast'] ~= nil and spec['ast'] ~= cjson.null then
    return false
  end
  if tree_or_nil(store['ast']) ~= nil or redis.call('LLEN', redo) > 0 then
    return false
  end
  local only = nil
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
  local got = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', room[consumer],
    'STREAMS', stream, '>')
  if got and #got[1][2] > 0 then
    local at = only % #order + 1
    if at ~= 1 then
      redis.call('DEL', ring)
      redis.call('RPUSH', ring, unpack(order, at))
      redis.call('RPUSH', ring, unpack(order, 1, at - 1))
    end
    if consumer ~= me then
      redis.call('XADD', bell, 'MAXLEN', 1, '*', 'r', 1)
    end
  end
  return true
end

reap(stream, group, members, alive, ring, redo, delayed, counts, now)
local order, room, total, busy, filters = rooms()
local serial = spec['kind'] == 'serial'
local buried = 0
if serial then
  -- Serial: nothing new while anything dealt is unacknowledged; then one consumer only.
  total = 0
  if not busy then
    for _, consumer in ipairs(order) do
      total = math.max(total, room[consumer])
    end
  end
end
if total > 0 and #order > 0 and deal_direct(order, room, filters, serial) then
  total = 0
end
if total > 0 and #order > 0 then
  local picks
  picks, buried = pick(total)
  if #picks > 0 and deal(order, room, filters, picks, serial) then
    redis.call('XADD', bell, 'MAXLEN', 1, '*', 'r', 1)
  end
end

local redelivered = {}
local mine = {}
if redis.call('EXISTS', counts) == 1 then  -- most of the time nothing was redelivered
  mine = pending_of(stream, group, me)
end
if #mine > 0 then
  local values = redis.call('HMGET', counts, unpack(mine))
  for i, id in ipairs(mine) do
    if values[i] then
      redelivered[#redelivered + 1] = id
      redelivered[#redelivered + 1] = values[i]
    end
  end
end
local newest = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
local rung = redis.call('XREVRANGE', bell, '+', '-', 'COUNT', 1)
return {
  newest[1] and newest[1][1] or '0-0',
  rung[1] and rung[1][1] or '0-0',
  redelivered,
  buried,
  store['version'],
  store['by'],
}
