-- Library (`--@include members`, after `clock` and `pool`): the consumers attached to a
-- shared or serial durable, their windows and leases, the round-robin ring, and the bell
-- that wakes them.
-- Functions take `d`, a table of the durable's keys and group (only the fields they use
-- need to be set):
--   d.stream   the channel's stream
--   d.group    the durable's name (its consumer group)
--   d.members  hash: consumer id -> {"w": window, "ast": own filter tree or null};
--              '_store' -> {"ast": store filter, "by": consumer id, "version": n} (Universal Messaging's shared durables)
--   d.alive    zset: consumer id -> lease expiry (server ms)
--   d.ring     list: consumer ids in round-robin order, next to deal first
--   d.bell     stream (MAXLEN 1) the members block on, rung when events move to them
--   d.taps     hash: tap key -> consumer id, the taps opened (below)
--   d.waits    hash: consumer id -> where its wait began (settle.lua); only where the
--              script names it
--
-- A tap lets one member read new events straight from the channel, with its own
-- XREADGROUP right after the dispatcher's script (blocking, when it has nothing else to
-- wait for): no pool, no XCLAIM, no bell. It is an empty stream with the durable's group
-- that the member names beside the channel (`STREAMS <channel> <tap> > >`), so the read
-- happens only while the tap exists: the dispatcher opens it when that read is exactly
-- what the dealing would do (no filter, nothing handed back or delayed, and the member
-- is serial and idle: all its room; or shared, busy, and alone with room: deal.lua's
-- deal_first), and deletes it (a blocked read wakes) before it deals anything else to
-- the member. The tap outlives the read: each read through it renews it (PEXPIRE, the
-- read's block time + 1 s), so it expires once its member stops asking, and detaching a
-- member (its lease lapsed) closes its taps. A shared member reads through its tap only
-- right after the script, never blocking: the next fetch decides again.

-- A filter tree as decoded from JSON: nil when there is none (absent or JSON null).
local function filter_tree(tree)
  if tree == nil or tree == cjson.null then
    return nil
  end
  return tree
end

-- A consumer joins (again) with its window and filter tree (or cjson.null), last in the ring.
-- `token` names this attachment (ack_shared.lua refuses acknowledgements made under an
-- earlier one); `hashed`: the hash of its id (lib/key_hash.lua), kept for a keyed durable's
-- dealing, which would compute it again at every fetch for every member.
local function add_member(d, consumer, window, tree, lease_ms, token, hashed)
  redis.call('HSET', d.members, consumer, cjson.encode({w = window, ast = tree, t = token, h = hashed}))
  redis.call('ZADD', d.alive, now_ms() + tonumber(lease_ms), consumer)
  -- Last in the ring, once. Never by emptying it first (LREM of its one member deletes the
  -- key): while a cluster moves the slot, a write to a key the script deleted is refused
  -- midway, and the script stops with its earlier writes made.
  local before = redis.call('LPOS', d.ring, consumer, 'COUNT', 0)
  redis.call('RPUSH', d.ring, consumer)
  if #before > 0 then
    redis.call('LREM', d.ring, #before, consumer)
  end
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

-- A member's own bell (lib/watch.lua: a keyed durable's idle members wait for it), named as
-- a shared member's door: '<ns>:{<channel>}:door:<durable>:<consumer>', from the stream's key
-- ('<ns>:{<channel>}:s').
local function member_bell(d, consumer)
  return string.sub(d.stream, 1, #d.stream - 2) .. ':door:' .. d.group .. ':' .. consumer
end

-- A consumer leaves: out of the members, the leases, the ring and the group (and its bell).
local function remove_member(d, consumer)
  redis.call('DEL', member_bell(d, consumer))
  redis.call('HDEL', d.members, consumer)
  redis.call('ZREM', d.alive, consumer)
  redis.call('LREM', d.ring, 0, consumer)
  redis.call('XGROUP', 'DELCONSUMER', d.stream, d.group, consumer)
  if redis.call('HLEN', d.members) == 1 then
    redis.call('HDEL', d.members, '_store')  -- the last consumer left: the next first one decides
  end
end

-- The store filter (Universal Messaging's shared durables): {ast = tree or null, by = consumer id, version = n};
-- version 0 by '' while no consumer has set one. `raw`: its JSON as the members hash holds
-- it, or nil for none (rooms(d) has it).
local function store_of(raw)
  if raw then
    return cjson.decode(raw)
  end
  return {version = 0, by = ''}
end

local function store_filter(d)
  return store_of(redis.call('HGET', d.members, '_store'))
end

local function set_store_filter(d, tree, by, version)
  redis.call('HSET', d.members, '_store', cjson.encode({ast = tree, by = by, version = version}))
end

-- A member's record (add_member): its window, its own filter tree (nil for none) and the
-- hash of its id (nil if it was not kept). (Two string matches instead of the JSON decode
-- cost the server more, measured.)
local function member_record(raw)
  local member = cjson.decode(raw)
  return member['w'], filter_tree(member['ast']), member['h']
end

-- The ring in order, the room left in each member's window (consumer -> n), their sum,
-- whether any member holds an event (serial durables wait for it), each member's own
-- filter tree (consumer -> tree; nil for none), what each holds, the hash of each
-- member's id where it was kept (consumer -> n), and the store filter (store_of).
local function rooms(d)
  local order = redis.call('LRANGE', d.ring, 0, -1)
  local windows, filters, hashes, store = {}, {}, {}, nil
  local flat = redis.call('HGETALL', d.members)
  for i = 1, #flat, 2 do
    if flat[i] == '_store' then
      store = flat[i + 1]
    else
      windows[flat[i]], filters[flat[i]], hashes[flat[i]] = member_record(flat[i + 1])
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
  return order, room, total, busy, filters, held, hashes, store_of(store)
end

-- The listed taps: consumer -> its tap keys, as the taps hash lists them (one call, no
-- look at each tap: a busy shared fetch has up to two per member). A listed tap may have
-- expired by itself (its reader stopped renewing it); whatever needs one open looks
-- (open_taps, set_tap, settle.lua's watchers), and a closed or detached member's are
-- unlisted with it (close_taps).
local function listed_taps(d)
  local taps = {}
  local flat = redis.call('HGETALL', d.taps)
  for i = 1, #flat, 2 do
    local consumer = flat[i + 1]
    taps[consumer] = taps[consumer] or {}
    table.insert(taps[consumer], flat[i])
  end
  return taps
end

-- Whether any of `taps` (listed_taps, the caller's own taken out) is open; those expired
-- are unlisted.
local function open_taps(d, taps)
  local open = false
  for consumer, keys in pairs(taps) do
    local live = {}
    for _, key in ipairs(keys) do
      if redis.call('EXISTS', key) == 1 then
        live[#live + 1] = key
      else
        redis.call('HDEL', d.taps, key)
      end
    end
    taps[consumer] = #live > 0 and live or nil
    open = open or #live > 0
  end
  return open
end

-- Close a consumer's taps: its blocked read, if any, wakes with an error and it fetches
-- again. Its wait is over too: what it holds from now on was dealt to it.
local function close_taps(d, taps, consumer)
  for _, key in ipairs(taps[consumer] or {}) do
    redis.call('DEL', key)
    redis.call('HDEL', d.taps, key)
  end
  taps[consumer] = nil
  if d.waits then
    redis.call('HDEL', d.waits, consumer)
  end
end

-- Open (`on`) the tap `key` of `consumer` for `ttl_ms` (its reader renews it with each
-- read through it, `PEXPIRE`), or close it. `live`: whether listed_taps(d) listed it among
-- the consumer's taps (nil: not known). A tap not listed is closed (taps are listed when
-- made and unlisted when deleted), so a busy consumer's fetch keeps its door closed at no
-- call; one listed may have expired, and is made again if the renewal finds it gone.
local function set_tap(d, key, consumer, on, ttl_ms, live)
  if on and live and redis.call('PEXPIRE', key, ttl_ms) == 1 then
    return
  elseif on then
    if redis.call('EXISTS', key) == 0 then
      redis.call('XGROUP', 'CREATE', key, d.group, '$', 'MKSTREAM')
    end
    redis.call('PEXPIRE', key, ttl_ms)
    redis.call('HSET', d.taps, key, consumer)
  elseif live ~= false then
    redis.call('HDEL', d.taps, key)
    redis.call('DEL', key)
  end
end

-- Whether `key` is among `keys` (a consumer's taps, as listed_taps(d) lists them).
local function listed(keys, key)
  for _, k in ipairs(keys or {}) do
    if k == key then
      return true
    end
  end
  return false
end

-- Wake every member reading through a tap (events were handed back, to be dealt again).
local function wake_taps(taps_key)
  for _, key in ipairs(redis.call('HKEYS', taps_key)) do
    redis.call('DEL', key)
  end
  redis.call('DEL', taps_key)
end

-- Turn the ring so that order[at] comes first (order: the ring as read; at 1 changes
-- nothing); returns the ring in its new order. One step, the usual turn, is one LMOVE.
local function turn_ring(d, order, at)
  if at == 1 then
    return order
  end
  local turned = {}
  for i = 0, #order - 1 do
    turned[i + 1] = order[(at - 1 + i) % #order + 1]
  end
  if at == 2 then
    redis.call('LMOVE', d.ring, d.ring, 'LEFT', 'RIGHT')
  else  -- the new order pushed, then the old one trimmed: the key never ceases to exist
    local old = redis.call('LLEN', d.ring)
    redis.call('RPUSH', d.ring, unpack(turned))
    redis.call('LTRIM', d.ring, old, -1)
  end
  return turned
end

-- Turn the ring past `me`, as if it was dealt to last; returns the ring in its new order.
local function turn_past(d, order, me)
  for i, consumer in ipairs(order) do
    if consumer == me and #order > 1 then
      return turn_ring(d, order, i % #order + 1)
    end
  end
  return order
end

-- Wake the members blocked on the bell (they re-fetch).
local function ring_bell(bell)
  redis.call('XADD', bell, 'MAXLEN', 1, '*', 'r', 1)
end
