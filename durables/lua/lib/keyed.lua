-- Library (`--@include keyed`, after `key_hash`, `pool`, `members`, `dead_letters`, `deal`,
-- `fields` and `holds`): the dealing of a keyed durable. Events of one key go to one consumer at a
-- time, in publish order; different keys go to different consumers in parallel.
--   * A key's owner is the attached consumer that scores highest for it (rendezvous
--     hashing, the same function as durables/key_hash.py): a join takes about 1/n of the
--     keys, a leave gives up only the leaver's.
--   * One event of a key is out at a time, and the key's next event is dealt only once
--     that one is no longer pending: acknowledged or dead-lettered. An event handed back
--     (rolled back, or its holder detached) stays pending under the pool, so it holds its
--     key until it is dealt again, first: a key is never reordered, never held by two
--     consumers, and moves to a new owner only between two of its events (the draining of
--     Pulsar's Key_Shared, PIP-379).
--   * Events without a key are dealt as a shared durable deals them, round robin.
-- Waiting events (the redo list: handed back, or ones whose key was busy) are looked at
-- first, in order, then new ones; those that cannot go now join the end of the redo list.
-- At most KEYED_LOOKAHEAD wait there: past that, no new events are read until some go (a
-- hot key then holds back the rest, as Key_Shared's look-ahead limit does).
--
-- `d` as in members.lua and deal.lua, with also d.holds (lib/holds.lua).
local KEYED_LOOKAHEAD = 1000

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

-- Deal waiting and new events by key (above) into the members' room. `known`: consumer ->
-- the hash of its id, where rooms(d) had it. Returns whether others than `me` got any, how
-- many events were dead-lettered, and what each member got (consumer -> ids).
local function deal_keyed(d, me, spec, store, order, room, filters, taps, total, known)
  if #order == 0 or total <= 0 then
    return false, 0, {}
  end
  local hashes = {}
  for _, consumer in ipairs(order) do
    hashes[consumer] = known[consumer] or key_hash(consumer)  -- attached before it was kept
  end
  local limit = tonumber(spec['max_deliveries'])
  local buried, at = 0, 1
  local dealt, busy, owners, outs, sets, unset = {}, {}, {}, {}, {}, {}

  -- Which keys of `keys` (false: none) have an event out, into `outs` (one HMGET).
  local function look_up(keys)
    local names, seen = {}, {}
    for _, key in ipairs(keys) do
      if key and outs[key] == nil and not seen[key] then
        seen[key] = true
        names[#names + 1] = key
      end
    end
    for i, out in ipairs(prefixed(d.holds, 'k:', names)) do
      outs[names[i]] = out or false
    end
  end

  -- Deal event `id` of `key` (false: none) now if it may go: true if it went.
  local function place(id, key)
    if total <= 0 then
      return false
    end
    local to
    if not key then
      local n = taker(d.stream, order, room, filters, at, id)
      if not n then
        return false
      end
      at, to = n % #order + 1, order[n]
    else
      if busy[key] then
        return false
      end
      busy[key] = true  -- dealt now, or it waits: either way its later events wait
      local out = outs[key]
      if out and out ~= id then
        if #redis.call('XPENDING', d.stream, d.group, out, out, 1) > 0 then
          return false  -- its event is out
        end
        unset[#unset + 1], unset[#unset + 2] = 'k:' .. key, 'i:' .. out  -- acked elsewhere
      end
      to = owners[key]
      if to == nil then
        to = key_owner(d.stream, order, hashes, filters, key_hash(key), id) or false
        owners[key] = to
      end
      if not to or room[to] <= 0 then
        return false
      end
      sets[#sets + 1], sets[#sets + 2] = 'k:' .. key, id
      sets[#sets + 1], sets[#sets + 2] = 'i:' .. id, key
    end
    dealt[to] = dealt[to] or {}
    table.insert(dealt[to], id)
    room[to], total = room[to] - 1, total - 1
    return true
  end

  -- The waiting events first, in order.
  local waiting = redis.call('LRANGE', d.redo, 0, KEYED_LOOKAHEAD - 1)
  local waiting_keys = prefixed(d.holds, 'i:', waiting)
  for i, id in ipairs(waiting) do
    if not waiting_keys[i] then  -- not known here (a keyless event, or one trimmed): read it
      local entry = redis.call('XRANGE', d.stream, id, id)
      waiting_keys[i] = entry[1] and field(entry[1][2], 'k') or false
    end
  end
  look_up(waiting_keys)
  -- Only the head of the list up to the last event that went is written again.
  local kept, gone, kept_before = {}, 0, 0
  for i, id in ipairs(waiting) do
    if total <= 0 then  -- nothing more can go: the rest stays as it is, looked at next time
      break
    elseif limit and bury(d, limit, id) then
      buried, gone, kept_before = buried + 1, i, #kept
    elseif place(id, waiting_keys[i]) then
      gone, kept_before = i, #kept
    else
      kept[#kept + 1] = id
    end
  end
  if gone > 0 then
    redis.call('LTRIM', d.redo, gone, -1)
    push_front(d.redo, {unpack(kept, 1, kept_before)})
  end

  -- Then new events, as many as there is room left, while the look-ahead is not full.
  local later = {}
  if total > 0 and #waiting < KEYED_LOOKAHEAD then
    local got = redis.call('XREADGROUP', 'GROUP', d.group, POOL, 'COUNT',
      math.min(total, KEYED_LOOKAHEAD - #kept), 'STREAMS', d.stream, '>')
    local durable_tree, store_tree = filter_tree(spec['ast']), filter_tree(store['ast'])
    local ids, keys, skipped = {}, {}, {}
    for _, entry in ipairs(got and got[1][2] or {}) do
      local id = entry[1]
      fields_of[id] = entry[2]
      if wanted(d.stream, durable_tree, id) and wanted(d.stream, store_tree, id) then
        ids[#ids + 1], keys[#ids + 1] = id, field(entry[2], 'k') or false
      else
        skipped[#skipped + 1] = id
      end
    end
    if #skipped > 0 then
      redis.call('XACK', d.stream, d.group, unpack(skipped))
    end
    look_up(keys)
    for i, id in ipairs(ids) do
      if not place(id, keys[i]) then
        later[#later + 1] = id
        if keys[i] then
          sets[#sets + 1], sets[#sets + 2] = 'i:' .. id, keys[i]
        end
      end
    end
  end

  if #unset > 0 then
    redis.call('HDEL', d.holds, unpack(unset))
  end
  in_chunks('HSET', d.holds, sets)  -- (pairs: a chunk is even)
  in_chunks('RPUSH', d.redo, later)
  local others = hand_out(d, me, dealt, taps)
  turn_ring(d, order, at)
  return others, buried, dealt
end
