#!lua flags=allow-oom
-- Trim a channel and settle its durables: drop the events every durable has
-- acknowledged and those past the channel's lifespan (mode 'retain'), or every
-- event up to an id (mode 'purge'). Durables are then moved past what was removed:
-- pending entries below the cut are acknowledged, positions advanced.
-- With 'retain', a filtered durable first moves past the non-matching events at its
-- head (no consumer would be given them), so they do not hold back retention.
-- The lifespan is measured on the server's clock, as leases are.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's meta hash (ttl_ms; 'moves' counts the groups moved, 'dropped:ttl'
--          and 'dropped:purge' the events removed unacknowledged)
-- KEYS[3]  the channel's durables hash (name -> spec JSON with 'ast')
-- KEYS[4..] two per durable named in ARGV[3..], in that order: its redelivery counts,
--          then its keep set (both lose the ids trimmed away)
-- ARGV[1]  'retain' or 'purge'
-- ARGV[2]  with 'purge': the last id to remove, or '+' for everything; else ''
-- ARGV[3..] durable names matching KEYS[4..]
-- Returns  how many events were removed.
--@include clock
--@include ids
--@include selector
local stream = KEYS[1]
local SKIP_SCAN = 1000
if redis.call('EXISTS', stream) == 0 then
  return 0
end

local groups = {}
for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
  local info = {}
  for i = 1, #g, 2 do
    info[g[i]] = g[i + 1]
  end
  groups[#groups + 1] = info
end

-- Move a filtered durable past the events at its head that its filter rejects.
local function skip_rejected(g)
  local raw = redis.call('HGET', KEYS[3], g['name'])
  local tree = raw and cjson.decode(raw)['ast']
  if not tree or tree == cjson.null then
    return
  end
  local entries = redis.call('XRANGE', stream, '(' .. g['last-delivered-id'], '+', 'COUNT', SKIP_SCAN)
  local last, skipped = nil, 0
  for _, entry in ipairs(entries) do
    if selector.matches(tree, selector.fields(entry[2])) then
      break
    end
    last, skipped = entry[1], skipped + 1
  end
  if last == nil then
    return
  end
  if g['entries-read'] then
    redis.call('XGROUP', 'SETID', stream, g['name'], last, 'ENTRIESREAD', g['entries-read'] + skipped)
  else
    redis.call('XGROUP', 'SETID', stream, g['name'], last)
  end
  g['last-delivered-id'] = last
end

-- cut: every entry with an id below it goes; acked_cut: below it, every durable has
-- acknowledged (set only when the lifespan cuts further).
local cut, acked_cut = nil, nil
if ARGV[1] == 'purge' then
  local last = ARGV[2]
  if last == '+' then
    local newest = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
    if #newest == 0 then
      return 0
    end
    last = newest[1][1]
  end
  cut = id_after(last)
else
  for _, g in ipairs(groups) do
    skip_rejected(g)
    local low
    if g['pending'] > 0 then
      low = redis.call('XPENDING', stream, g['name'])[2]
    else
      low = id_after(g['last-delivered-id'])
    end
    if cut == nil or id_before(low, cut) then
      cut = low
    end
  end
  local ttl = tonumber(redis.call('HGET', KEYS[2], 'ttl_ms'))
  if ttl then
    local expired = string.format('%.0f-0', now_ms() - ttl)
    if cut == nil or id_before(cut, expired) then
      acked_cut, cut = cut or '0-0', expired
    end
  end
end
if cut == nil then
  return 0
end

-- Events every durable acknowledged go first; what the lifespan or a purge removes beyond
-- them is counted in the meta hash ('dropped:ttl', 'dropped:purge': counters the metrics
-- export).
local length = redis.call('XLEN', stream)
if acked_cut then
  redis.call('XTRIM', stream, 'MINID', acked_cut)
end
local kept = redis.call('XLEN', stream)
redis.call('XTRIM', stream, 'MINID', cut)
local removed = length - redis.call('XLEN', stream)
local dropped = kept - (length - removed)
if dropped > 0 then
  redis.call('HINCRBY', KEYS[2], ARGV[1] == 'purge' and 'dropped:purge' or 'dropped:ttl', dropped)
end

-- A redelivery count goes with its event's acknowledgement, but a plain acknowledgement
-- names only the ids its consumer was dealt with a count. A consumer whose lease lapsed
-- does not know of the count its events got when they were dealt again; if its late
-- acknowledgement is the one that counts, the count stays. Counts of events gone from
-- the stream go here; a hash of more than COUNTS_SCAN counts (that many events dealt
-- again and still pending) is left to the acknowledgements.
local COUNTS_SCAN = 10000
local function drop_counts_below(counts, cut)
  if redis.call('HLEN', counts) > COUNTS_SCAN then
    return
  end
  local gone = {}
  for _, id in ipairs(redis.call('HKEYS', counts)) do
    if id_before(id, cut) then
      gone[#gone + 1] = id
      if #gone == 1000 then
        redis.call('HDEL', counts, unpack(gone))
        gone = {}
      end
    end
  end
  if #gone > 0 then
    redis.call('HDEL', counts, unpack(gone))
  end
end

local own = {}
for i = 3, #ARGV do
  own[ARGV[i]] = {KEYS[4 + (i - 3) * 2], KEYS[5 + (i - 3) * 2]}
end
local stream_info = nil
for _, g in ipairs(groups) do
  local name = g['name']
  repeat
    local pending = redis.call('XPENDING', stream, name, '-', '(' .. cut, 1000)
    if #pending > 0 then
      local ids = {}
      for i, entry in ipairs(pending) do
        ids[i] = entry[1]
      end
      redis.call('XACK', stream, name, unpack(ids))
      if own[name] then
        redis.call('HDEL', own[name][1], unpack(ids))
        redis.call('SREM', own[name][2], unpack(ids))
      end
    end
  until #pending < 1000
  if own[name] then
    drop_counts_below(own[name][1], cut)
  end
  local position = id_below(cut)
  if id_before(g['last-delivered-id'], position) then
    if stream_info == nil then
      stream_info = {}
      local flat = redis.call('XINFO', 'STREAM', stream)
      for i = 1, #flat, 2 do
        stream_info[flat[i]] = flat[i + 1]
      end
    end
    if id_before(stream_info['last-generated-id'], position) then
      position = stream_info['last-generated-id']
    end
    -- ENTRIESREAD keeps the group's lag exact (everything left is unread). 'moves' tells
    -- the queue limits that positions they noted may be stale (lib/queue_limits.lua).
    redis.call('XGROUP', 'SETID', stream, name, position,
      'ENTRIESREAD', stream_info['entries-added'] - redis.call('XLEN', stream))
    redis.call('HINCRBY', KEYS[2], 'moves', 1)
  end
end
return removed
