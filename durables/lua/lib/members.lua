-- Library (`--@include members`, after `clock` and `pool`): the consumers attached to a
-- shared or serial durable, their windows and leases, the round-robin ring, and the bell
-- that wakes them.
-- Functions take `d`, a table of the durable's keys and group (only the fields they use
-- need to be set):
--   d.stream   the channel's stream
--   d.group    the durable's name (its consumer group)
--   d.members  hash: consumer id -> {"w": window, "ast": own filter tree or null};
--              '_store' -> {"ast": store filter, "by": consumer id, "version": n} (seed 004)
--   d.alive    zset: consumer id -> lease expiry (server ms)
--   d.ring     list: consumer ids in round-robin order, next to deal first
--   d.bell     stream (MAXLEN 1) the members block on, rung when events move to them

-- A filter tree as decoded from JSON: nil when there is none (absent or JSON null).
local function filter_tree(tree)
  if tree == nil or tree == cjson.null then
    return nil
  end
  return tree
end

-- A consumer joins (again) with its window and filter tree (or cjson.null), last in the ring.
local function add_member(d, consumer, window, tree, lease_ms)
  redis.call('HSET', d.members, consumer, cjson.encode({w = window, ast = tree}))
  redis.call('ZADD', d.alive, now_ms() + tonumber(lease_ms), consumer)
  redis.call('LREM', d.ring, 0, consumer)
  redis.call('RPUSH', d.ring, consumer)
end

-- Extend a member's lease; false, and nothing done, if it is no member (any more). `now`:
-- the server time if the caller has it already, else nil and it is read here.
local function renew_member(d, consumer, lease_ms, now)
  if redis.call('HEXISTS', d.members, consumer) == 0 then
    return false
  end
  redis.call('ZADD', d.alive, (now or now_ms()) + tonumber(lease_ms), consumer)
  return true
end

-- A consumer leaves: out of the members, the leases, the ring and the group.
local function remove_member(d, consumer)
  redis.call('HDEL', d.members, consumer)
  redis.call('ZREM', d.alive, consumer)
  redis.call('LREM', d.ring, 0, consumer)
  redis.call('XGROUP', 'DELCONSUMER', d.stream, d.group, consumer)
  if redis.call('HLEN', d.members) == 1 then
    redis.call('HDEL', d.members, '_store')  -- the last consumer left: the next first one decides
  end
end

-- The store filter (seed 004): {ast = tree or null, by = consumer id, version = n};
-- version 0 by '' while no consumer has set one.
local function store_filter(d)
  local raw = redis.call('HGET', d.members, '_store')
  if raw then
    return cjson.decode(raw)
  end
  return {version = 0, by = ''}
end

local function set_store_filter(d, tree, by, version)
  redis.call('HSET', d.members, '_store', cjson.encode({ast = tree, by = by, version = version}))
end

-- The ring in order, the room left in each member's window (consumer -> n), their sum,
-- whether any member holds an event (serial durables wait for it), and each member's own
-- filter tree (consumer -> tree; nil for none).
local function rooms(d)
  local order = redis.call('LRANGE', d.ring, 0, -1)
  local windows, filters = {}, {}
  local flat = redis.call('HGETALL', d.members)
  for i = 1, #flat, 2 do
    if flat[i] ~= '_store' then
      local member = cjson.decode(flat[i + 1])
      windows[flat[i]] = member['w']
      filters[flat[i]] = filter_tree(member['ast'])
    end
  end
  local held, busy = {}, false
  for _, pair in ipairs(redis.call('XPENDING', d.stream, d.group)[4] or {}) do
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

-- Turn the ring so that order[at] comes first (order: the ring as read; at 1 changes nothing).
local function turn_ring(d, order, at)
  if at ~= 1 then
    redis.call('DEL', d.ring)
    redis.call('RPUSH', d.ring, unpack(order, at))
    redis.call('RPUSH', d.ring, unpack(order, 1, at - 1))
  end
end

-- Wake the members blocked on the bell (they re-fetch).
local function ring_bell(bell)
  redis.call('XADD', bell, 'MAXLEN', 1, '*', 'r', 1)
end
