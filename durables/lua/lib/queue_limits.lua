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

-- Every group of the stream: name -> its XINFO GROUPS fields (one call, whatever the
-- number of sessions looked at).
local function all_groups(stream)
  local found = {}
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local info = {}
    for i = 1, #g, 2 do
      info[g[i]] = g[i + 1]
    end
    found[info['name']] = info
  end
  return found
end

-- (queue depth, pending, idle ms of its consumer or nil) of a session's group, or nil.
local function session_queue(stream, group, groups)
  local info = (groups or all_groups(stream))[group]
  if info == nil then
    return nil, 0, nil
  end
  local pending, lag = info['pending'], info['lag']
  if type(lag) ~= 'number' then  -- unknown after a SETID: count what is unread
    lag = #redis.call('XRANGE', stream, '(' .. info['last-delivered-id'], '+')
  end
  local idle = nil
  for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', stream, group)) do
    for i = 1, #c, 2 do
      if c[i] == 'idle' then
        idle = c[i + 1]
      end
    end
  end
  return lag + pending, pending, idle
end

-- Drop a session's `excess` oldest queued events: pending ones first, then unread ones.
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
      local read = info['entries-read']
      if type(read) == 'number' then  -- keeps the group's lag exact
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
  local depth, pending, idle = session_queue(q.stream, group, groups)
  if depth == nil then
    redis.call('ZREM', q.trips, sid)
    return -1, 0, 0
  end
  if live == nil then
    live = idle ~= nil and idle < lease_ms
  end
  local limit = max
  local was = expanded
  if dmax and dmax > max then
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
      local dropped = drop_oldest(q.stream, group, depth - limit,
        (groups or all_groups(q.stream))[group])
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
