-- Library (`--@include queue_limits`): the queue limits of durable client sessions on one
-- channel (seed 002); needs no other library. A session's queue on the channel is its group's unread events plus its pending ones. Its limit is `max` while it
-- is live; while away (its consumer idle longer than its lease) it is `dmax` when that is
-- larger, and after it is back the larger limit stays until the queue has drained to 80 %
-- of `max`. The first event beyond the limit applies the overflow policy: 'close' (the
-- session's group is destroyed: its queue discarded; the session learns it from the
-- overflowed hash) or 'drop_oldest'. Publishing stays cheap with many sessions: each has a
-- trip point (the channel's publish count at which its queue could first pass its limit)
-- in a sorted set, and only sessions whose trip point was reached are looked at.
-- The limits hash holds per session 'max|dmax|overflow|lease_ms|expanded'.
-- q: {stream, meta, trips, limits, overflowed}

local function split_spec(raw)
  local parts = {}
  for part in string.gmatch(raw, '([^|]*)|?') do
    parts[#parts + 1] = part
  end
  return tonumber(parts[1]), tonumber(parts[2]), parts[3], tonumber(parts[4]), parts[5] == '1'
end

-- Every group of the stream: name -> its XINFO GROUPS reply, fields and values in turn
-- (one call, whatever the number of sessions looked at). Only the groups looked at are
-- made into tables (group_info): a channel may have thousands.
local function all_groups(stream)
  local found = {}
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    for i = 1, #g, 2 do
      if g[i] == 'name' then  -- the first field
        found[g[i + 1]] = g
        break
      end
    end
  end
  return found
end

-- One group's XINFO GROUPS fields: field -> value.
local function group_info(flat)
  local info = {}
  for i = 1, #flat, 2 do
    info[flat[i]] = flat[i + 1]
  end
  return info
end

-- A group's read counter (`entries-read`), as XINFO GROUPS gave it, or worked out from the
-- stream's count of entries added and the group's `lag`: a group made at '$' has none
-- until it reads. Nil if it cannot be known.
local function read_counter(stream, info, lag)
  local read = info['entries-read']
  if type(read) == 'number' then
    return read
  end
  local flat = redis.call('XINFO', 'STREAM', stream)
  for i = 1, #flat, 2 do
    if flat[i] == 'entries-added' and type(flat[i + 1]) == 'number' and flat[i + 1] >= lag then
      return flat[i + 1] - lag
    end
  end
  return nil
end

-- (queue depth, pending, its XINFO GROUPS fields with a known 'lag') of a session's group,
-- or nil.
local function session_queue(stream, group, groups)
  local flat = (groups or all_groups(stream))[group]
  if flat == nil then
    return nil, 0, nil
  end
  local info = group_info(flat)
  local pending, lag = info['pending'], info['lag']
  if type(lag) ~= 'number' then
    -- Unknown (the group was moved without its read counter): count what is unread, and
    -- set the counter, so the next look need not read every unread event again.
    lag = #redis.call('XRANGE', stream, '(' .. info['last-delivered-id'], '+')
    local read = type(info['entries-read']) ~= 'number' and read_counter(stream, info, lag)
    if read then
      redis.call('XGROUP', 'SETID', stream, group, info['last-delivered-id'], 'ENTRIESREAD', read)
      info['entries-read'] = read
    end
    info['lag'] = lag
  end
  return lag + pending, pending, info
end

-- Whether a session is live: its consumer was active within its lease.
local function session_live(stream, group, lease_ms)
  for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', stream, group)) do
    for i = 1, #c, 2 do
      if c[i] == 'idle' then
        return c[i + 1] < lease_ms
      end
    end
  end
  return false
end

-- Drop a session's `excess` oldest queued events: pending ones first, then unread ones.
-- `info`: as session_queue returned it. The group's read counter moves with it, so its lag
-- stays known.
local function drop_oldest(stream, group, excess, info)
  local dropped = 0
  local pending = redis.call('XPENDING', stream, group, '-', '+', excess)
  if #pending > 0 then
    local ids = {}
    for i, p in ipairs(pending) do
      ids[i] = p[1]
    end
    dropped = redis.call('XACK', stream, group, unpack(ids))
  end
  if dropped < excess then
    local skip = redis.call('XRANGE', stream, '(' .. info['last-delivered-id'], '+',
      'COUNT', excess - dropped)
    if #skip > 0 then
      local read = read_counter(stream, info, info['lag'])
      if read then  -- keeps the group's lag exact
        redis.call('XGROUP', 'SETID', stream, group, skip[#skip][1], 'ENTRIESREAD', read + #skip)
      else
        redis.call('XGROUP', 'SETID', stream, group, skip[#skip][1])
      end
      dropped = dropped + #skip
    end
  end
  return dropped
end

-- Look at one session's queue now: apply the limit, reset its trip point.
-- live: true / false as the caller knows it, or nil to judge by its consumer's idle time.
-- Returns depth, pending, limit (depth -1 when the session has no group or no limits).
local function check_queue(q, sid, published, live, groups)
  local raw = redis.call('HGET', q.limits, sid)
  if not raw then
    redis.call('ZREM', q.trips, sid)
    return -1, 0, 0
  end
  local max, dmax, overflow, lease_ms, expanded = split_spec(raw)
  local group = '~session:' .. sid
  local depth, pending, info = session_queue(q.stream, group, groups)
  if depth == nil then
    redis.call('ZREM', q.trips, sid)
    return -1, 0, 0
  end
  local limit = max
  local was = expanded
  if dmax and dmax > max then  -- the limit depends on whether it is live
    if live == nil then
      live = session_live(q.stream, group, lease_ms)
    end
    if not live then
      limit, expanded = dmax, true
    elseif expanded then
      if depth * 5 <= max * 4 then
        expanded = false
      else
        limit = dmax
      end
    end
  end
  if expanded ~= was then
    redis.call('HSET', q.limits, sid, string.format('%d|%s|%s|%d|%s', max, dmax or '',
      overflow, lease_ms, expanded and '1' or '0'))
  end
  if depth > limit then
    if overflow == 'drop_oldest' then
      local dropped = drop_oldest(q.stream, group, depth - limit, info)
      redis.call('HINCRBY', q.overflowed, 'dropped:' .. sid, dropped)
      depth = depth - dropped
      pending = math.max(0, pending - dropped)
    else
      redis.call('XGROUP', 'DESTROY', q.stream, group)
      redis.call('HDEL', q.limits, sid)
      redis.call('ZREM', q.trips, sid)
      redis.call('HSET', q.overflowed, 'closed:' .. sid, depth .. '|' .. limit)
      return depth, pending, limit
    end
  end
  redis.call('ZADD', q.trips, published + (limit - depth) + 1, sid)
  return depth, pending, limit
end

-- After publishing: look at the sessions whose trip point the publish count reached.
local function check_trips(q, published)
  local due = redis.call('ZRANGEBYSCORE', q.trips, '-inf', published, 'LIMIT', 0, 64)
  if #due == 0 then
    return
  end
  local groups = all_groups(q.stream)
  for _, sid in ipairs(due) do
    check_queue(q, sid, published, nil, groups)
  end
end
