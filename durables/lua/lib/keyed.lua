-- Library (`--@include keyed`, after `pool`, `members`, `dead_letters` and `deal`): the
-- dealing of a keyed durable. Events of one key go to one consumer at a time, in publish
-- order; different keys go to different consumers in parallel.
--   * A key's owner is the attached consumer that scores highest for it (rendezvous
--     hashing, the same function as durables/key_hash.py): a join takes about 1/n of the
--     keys, a leave gives up only the leaver's.
--   * One event of a key is out at a time: d.holds names it (key -> event id), and the
--     key's next event is dealt only once that one is no longer pending: acknowledged or
--     dead-lettered. An event handed back (rolled back, or its holder detached) stays
--     pending under the pool, so it holds its key until it is dealt again, first: a key
--     is never reordered, never held by two consumers, and moves to a new owner only
--     between two of its events (the draining of Pulsar's Key_Shared, PIP-379).
--   * Events without a key are dealt as a shared durable deals them, round robin.
-- Waiting events (the redo list: handed back, or new ones whose key was busy) are looked
-- at first, in order, then new ones; those that cannot go now join the end of the redo
-- list. At most KEYED_LOOKAHEAD wait there: past that, no new events are read until some
-- go (a hot key then holds back the rest, as Key_Shared's look-ahead limit does).
-- `d` as in members.lua and deal.lua, with also d.holds (hash: key -> event id out).
local KEYED_LOOKAHEAD = 1000
local KEY_PRIME = 67108859  -- below 2^26: squares stay exact in a double

local function key_mixed(value)
  for _ = 1, 2 do
    value = (value * 48271 + 11) % KEY_PRIME
    value = (value * value + 7) % KEY_PRIME
  end
  return value
end

-- The hash of a key (its bytes), as durables.key_hash.key_hash.
local function key_hash(key)
  local value = 0
  for i = 1, #key do
    value = (value * 257 + string.byte(key, i) + 1) % KEY_PRIME
  end
  return key_mixed(value)
end

-- The value of field 'k' in a stream entry's field list, or nil.
local function key_of(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'k' then
      return fields[i + 1]
    end
  end
  return nil
end

-- The member whose filter takes event `id` and scores highest for the key hash `hashed`
-- (ties to the smallest id), or nil.
local function key_owner(stream, order, hashes, filters, hashed, id)
  local best, best_score = nil, -1
  for _, consumer in ipairs(order) do
    local mine = key_mixed((hashed * 65599 + hashes[consumer]) % KEY_PRIME)
    if (mine > best_score or (mine == best_score and consumer < best))
        and wanted(stream, filters[consumer], id) then
      best, best_score = consumer, mine
    end
  end
  return best
end

-- True if event `out` is still pending: its key is held.
local function still_out(d, out)
  return #redis.call('XPENDING', d.stream, d.group, out, out, 1) > 0
end

-- Deal waiting and new events by key (above) into the members' room. Returns whether
-- others than `me` got any, and how many events were dead-lettered.
local function deal_keyed(d, me, spec, store, order, room, filters, taps, total)
  if #order == 0 then
    return false, 0
  end
  local hashes = {}
  for _, consumer in ipairs(order) do
    hashes[consumer] = key_hash(consumer)
  end
  local dealt, busy, at, buried = {}, {}, 1, 0
  local limit = tonumber(spec['max_deliveries'])

  -- Deal one event if it may go now: true if it went.
  local function place(id, fields)
    if total <= 0 then
      return false
    end
    local key = key_of(fields)
    local to
    if key == nil then
      local i = taker(d.stream, order, room, filters, at, id)
      if i == nil then
        return false
      end
      at, to = i % #order + 1, order[i]
    else
      if busy[key] then
        return false
      end
      local out = redis.call('HGET', d.holds, key)
      if out and out ~= id and still_out(d, out) then
        busy[key] = true
        return false
      end
      to = key_owner(d.stream, order, hashes, filters, key_hash(key), id)
      if to == nil or room[to] <= 0 then
        busy[key] = true  -- its later events wait behind it
        return false
      end
      redis.call('HSET', d.holds, key, id)
    end
    dealt[to] = dealt[to] or {}
    table.insert(dealt[to], id)
    room[to], total = room[to] - 1, total - 1
    return true
  end

  local waiting = redis.call('LRANGE', d.redo, 0, KEYED_LOOKAHEAD - 1)
  local kept, changed = {}, false
  for _, id in ipairs(waiting) do
    if bury(d, limit, id) then
      buried, changed = buried + 1, true
    else
      local entry = redis.call('XRANGE', d.stream, id, id)
      if place(id, entry[1] and entry[1][2] or {}) then
        changed = true
      else
        kept[#kept + 1] = id
      end
    end
  end
  if changed then
    redis.call('LTRIM', d.redo, #waiting, -1)
    push_front(d.redo, kept)
  end
  -- New events, while there is room and the look-ahead is not full.
  local durable_tree, store_tree = filter_tree(spec['ast']), filter_tree(store['ast'])
  local later = {}
  while total > 0 and #kept + #later < KEYED_LOOKAHEAD
      and #waiting < KEYED_LOOKAHEAD do
    local got = redis.call('XREADGROUP', 'GROUP', d.group, POOL, 'COUNT',
      math.min(total, KEYED_LOOKAHEAD - #kept - #later), 'STREAMS', d.stream, '>')
    if not got then
      break
    end
    local skipped = {}
    for _, entry in ipairs(got[1][2]) do
      local id = entry[1]
      fields_of[id] = entry[2]
      if not (wanted(d.stream, durable_tree, id) and wanted(d.stream, store_tree, id)) then
        skipped[#skipped + 1] = id
      elseif not place(id, entry[2]) then
        later[#later + 1] = id
      end
    end
    if #skipped > 0 then
      redis.call('XACK', d.stream, d.group, unpack(skipped))
    end
  end
  for i = 1, #later, 1000 do
    redis.call('RPUSH', d.redo, unpack(later, i, math.min(i + 999, #later)))
  end
  local others = false
  for consumer, ids in pairs(dealt) do
    close_taps(d, taps, consumer)
    claim(d.stream, d.group, consumer, ids)
    others = others or consumer ~= me
  end
  turn_ring(d, order, at)
  return others, buried
end
