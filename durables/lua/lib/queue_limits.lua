-- Library (`--@include queue_limits`, after `clock` and `groups`): the queue limits of
-- durable client sessions on one channel (Diffusion's client reconnection). A session's queue on the channel is its group's
-- unread events plus its pending ones. Its limit is `max` while it
-- is live; while away (its consumer idle longer than its lease) it is `dmax` when that is
-- larger, and after it is back the larger limit stays until the queue has drained to 80 %
-- of `max`. A session that left with keep-alive said so (a look with live false): it is
-- away from then on, whatever its consumer's idle time, until it sets its limits again. The first event beyond the limit applies the overflow policy: 'close' (the
-- session's group is destroyed: its queue discarded; the session learns it from the
-- overflowed hash) or 'drop_oldest'. Publishing stays cheap with many sessions: each has a
-- trip point (the channel's publish count at which its queue could first pass its limit)
-- in a sorted set, and only sessions whose trip point was reached are looked at.
-- The limits hash holds per session 'max|dmax|overflow|lease_ms|expanded' (expanded: '0',
-- '1', or 'a' for away by its own word, which is expanded too), followed, once
-- a look has known it, by the group's position as that look left it:
-- '|last-delivered-id|entries-read|ms|moves|seen' (see mirrored_queue).
-- q: {stream, meta, trips, limits, overflowed, moves (optional: see new_look), tripped
-- (optional: true when the meta hash is known to have no 'notrips', see publish.lua)}

-- A noted position is trusted if its group's consumers last interacted with it when they
-- had before the look that noted it (within SEEN_SLACK_MS: their idle times are measured
-- against the server's clock at moments a script does not see), or if they have all been
-- quiet since QUIET_MS before that look (after a failover, their times come from another
-- machine's clock).
local SEEN_SLACK_MS = 5
local QUIET_MS = 1000

local function split_spec(raw)
  local p = {}
  for part in string.gmatch(raw, '([^|]*)|?') do
    p[#p + 1] = part
  end
  return {max = tonumber(p[1]), dmax = tonumber(p[2]), overflow = p[3],
    lease_ms = tonumber(p[4]), expanded = p[5] == '1' or p[5] == 'a', away = p[5] == 'a',
    last = p[6] ~= '' and p[6] or nil, read = tonumber(p[7]), at = tonumber(p[8]), moves = p[9],
    seen = tonumber(p[10])}
end

-- How long since any of a group's consumers last interacted with it (read, or tried to),
-- from their XINFO CONSUMERS reply; nil if it has none.
local function least_idle(consumers)
  local least = nil
  for _, c in ipairs(consumers) do
    for i = 1, #c, 2 do
      if c[i] == 'idle' then
        least = math.min(least or c[i + 1], c[i + 1])
        break
      end
    end
  end
  return least
end

-- When a group's consumers last interacted with it, by the server's clock, from their XINFO
-- CONSUMERS reply, which must be the call just before (so never before the truth); 0 if
-- it has none.
local function last_seen(consumers)
  local idle = least_idle(consumers)
  return idle and now_ms() - idle or 0
end

-- (queue depth, pending, its XINFO GROUPS fields with a known 'lag') of a session's group,
-- or nil.
local function session_queue(stream, group, groups)
  local flat = groups[group]
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

-- (queue depth, pending, fields as session_queue gives them, XINFO CONSUMERS reply) of a
-- session's group from the position its last look left (spec.last, spec.read, noted at
-- spec.at), or nil if that cannot be trusted. No command reads one group's position: XINFO
-- GROUPS answers for every group on the channel (about 11,000 instructions each; a channel
-- has one per session), and a session at its limit is looked at by every publish. Only
-- these move a session's group: its consumer reading (when it last tried is noted with the
-- position: spec.seen), a look here (which notes the position it leaves), a trim (counted
-- in the meta hash's 'moves') and leaving the channel (which removes the spec with it).
-- look: {moves, added} of this publish, `added` filled in when first needed.
local function mirrored_queue(stream, group, spec, look)
  if spec.at == nil or spec.moves ~= look.moves then
    return nil
  end
  local consumers = redis.pcall('XINFO', 'CONSUMERS', stream, group)
  if consumers.err then  -- no such group
    return nil
  end
  local seen = last_seen(consumers)
  -- The same last interaction, well before the look that noted it (a later one is after
  -- that look), or none since well before that look.
  local same = spec.seen and math.abs(seen - spec.seen) <= SEEN_SLACK_MS
    and spec.seen < spec.at - 2 * SEEN_SLACK_MS
  if #consumers > 0 and not same and seen >= spec.at - QUIET_MS then
    return nil
  end
  look.added = look.added or entries_added(stream)
  local pending = redis.call('XPENDING', stream, group)[1]
  local lag = look.added - spec.read
  return lag + pending, pending,
    {['last-delivered-id'] = spec.last, ['entries-read'] = spec.read, lag = lag}, consumers
end

-- Whether a session is live: its consumer was active within its lease.
-- consumers: the group's XINFO CONSUMERS reply.
local function session_live(consumers, lease_ms)
  local idle = least_idle(consumers)
  return idle ~= nil and idle < lease_ms
end

-- Drop a session's `excess` oldest queued events: pending ones first (`pending` of them),
-- then unread ones. `info`: as session_queue returned it; its position moves with the
-- group. The group's read counter moves with it, so its lag stays known. newest: the ids
-- of the events just published (the channel's newest, in order), or nil.
local function drop_oldest(stream, group, excess, pending, info, newest)
  local dropped = 0
  pending = pending > 0 and redis.call('XPENDING', stream, group, '-', '+', excess) or {}
  if #pending > 0 then
    local ids = {}
    for i, p in ipairs(pending) do
      ids[i] = p[1]
    end
    dropped = redis.call('XACK', stream, group, unpack(ids))
  end
  if dropped < excess then
    local left, last, skipped = excess - dropped, nil, 0
    local kept = info['lag'] - left  -- unread events that stay: the channel's newest
    if newest and kept >= 0 and kept < #newest then
      -- The group moves to the event before them, one just published: no XRANGE returns
      -- (and Lua parses) every event passed over.
      last, skipped = newest[#newest - kept], left
    else
      local skip = redis.call('XRANGE', stream, '(' .. info['last-delivered-id'], '+',
        'COUNT', left)
      if #skip > 0 then
        last, skipped = skip[#skip][1], #skip
      end
    end
    if last then
      local read = read_counter(stream, info, info['lag'])
      if read then  -- keeps the group's lag exact
        redis.call('XGROUP', 'SETID', stream, group, last, 'ENTRIESREAD', read + skipped)
        info['entries-read'] = read + skipped
      else
        redis.call('XGROUP', 'SETID', stream, group, last)
        info['entries-read'] = nil
      end
      info['last-delivered-id'] = last
      dropped = dropped + skipped
    end
  end
  return dropped
end

-- Look at one session's queue now: apply the limit, reset its trip point.
-- live: true / false as the session says (false stays: see the top), or nil to judge by
-- what it said last, else by its consumer's idle time.
-- look: as for mirrored_queue, with also `groups` (all_groups, once asked) and `newest`
-- (see drop_oldest).
-- Returns depth, pending, limit (depth -1 when the session has no group or no limits).
local function check_queue(q, sid, published, live, look)
  local raw = redis.call('HGET', q.limits, sid)
  if not raw then
    redis.call('ZREM', q.trips, sid)
    return -1, 0, 0
  end
  local spec = split_spec(raw)
  local group = '~session:' .. sid
  local depth, pending, info, consumers = mirrored_queue(q.stream, group, spec, look)
  local mirrored = depth ~= nil
  if not mirrored then
    look.groups = look.groups or all_groups(q.stream)
    depth, pending, info = session_queue(q.stream, group, look.groups)
    if depth == nil then
      redis.call('ZREM', q.trips, sid)
      return -1, 0, 0
    end
  end
  local max, dmax = spec.max, spec.dmax
  local limit, expanded = max, spec.expanded
  local away = live == false or (live == nil and spec.away)
  if away then
    live = false
  end
  if dmax and dmax > max then  -- the limit depends on whether it is live
    if live == nil then
      consumers = consumers or redis.call('XINFO', 'CONSUMERS', q.stream, group)
      live = session_live(consumers, spec.lease_ms)
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
  if depth > limit then
    if spec.overflow == 'drop_oldest' then
      local dropped = drop_oldest(q.stream, group, depth - limit, pending, info, look.newest)
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
  -- The spec again, with the position this look leaves (when known). A trusted one keeps
  -- its time and its consumers' last interaction: only this look moved the group since.
  local position = ''
  if type(info['entries-read']) == 'number' then
    local at, seen = spec.at, spec.seen or 0
    if not mirrored then
      seen = last_seen(redis.call('XINFO', 'CONSUMERS', q.stream, group))
      at = now_ms()
    end
    position = string.format('|%s|%d|%d|%s|%d', info['last-delivered-id'],
      info['entries-read'], at, look.moves, seen)
  end
  local new = string.format('%d|%s|%s|%d|%s%s', max, dmax or '', spec.overflow, spec.lease_ms,
    away and 'a' or expanded and '1' or '0', position)
  if new ~= raw then
    redis.call('HSET', q.limits, sid, new)
  end
  if not q.tripped then  -- publish.lua skips the trip points while 'notrips' is set
    redis.call('HDEL', q.meta, 'notrips')
    q.tripped = true
  end
  redis.call('ZADD', q.trips, published + (limit - depth) + 1, sid)
  return depth, pending, limit
end

-- The look shared by every session checked at one time (see check_queue). q.moves: the meta
-- hash's 'moves' if the caller has read it.
local function new_look(q)
  return {moves = q.moves or redis.call('HGET', q.meta, 'moves') or '0'}
end

-- After publishing: look at the sessions whose trip point the publish count reached.
-- newest: the ids of the events published, in order (nil if not known).
local function check_trips(q, published, newest)
  local due = redis.call('ZRANGEBYSCORE', q.trips, '-inf', published, 'LIMIT', 0, 64)
  if #due == 0 then
    return
  end
  local look = new_look(q)
  look.newest = newest
  for _, sid in ipairs(due) do
    check_queue(q, sid, published, nil, look)
  end
end
