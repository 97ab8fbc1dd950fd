#!lua flags=allow-oom
-- A session's queue on one channel: set its limits (when given) and look at it now,
-- applying the limit as a publish would (lib/queue_limits.lua); also reports and clears
-- what an overflow did while nobody was looking.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's meta hash ('published')
-- KEYS[3]  the channel's session trip points
-- KEYS[4]  the channel's session queue limits
-- KEYS[5]  the channel's overflowed sessions
-- ARGV[1]  session id
-- ARGV[2]  'max|dmax|overflow|lease_ms' to set the limits, '-' to remove them, '' to keep
-- ARGV[3]  '1' the session is live, '0' it left with keep-alive (away until it sets its
--          limits again), '' judge by what it said last, else its consumer's idle time
-- ARGV[4]  '0': the caller needs no depth of a queue without limits (no XINFO GROUPS, which
--          answers for every group of the channel); else '1'
-- Returns  {depth (-1: no queue here; 0 when not needed), pending, limit (0: none), events
--          dropped since last asked, 'closed' if an overflow closed it}.
-- Errors   none of its own.
--@include clock
--@include groups
--@include queue_limits
local q = {stream = KEYS[1], meta = KEYS[2], trips = KEYS[3], limits = KEYS[4],
  overflowed = KEYS[5]}
local sid = ARGV[1]
if ARGV[2] == '-' then
  redis.call('HDEL', q.limits, sid)
  redis.call('ZREM', q.trips, sid)
elseif ARGV[2] ~= '' then
  local old = redis.call('HGET', q.limits, sid)
  local expanded = old and split_spec(old).expanded and '1' or '0'
  -- the group's noted position stays: it is the group's, whatever its limits
  local position = old and string.match(old, '^[^|]*|[^|]*|[^|]*|[^|]*|[^|]*(.*)$') or ''
  redis.call('HSET', q.limits, sid, ARGV[2] .. '|' .. expanded .. position)
end
local dropped = tonumber(redis.call('HGET', q.overflowed, 'dropped:' .. sid) or '0')
local closed = redis.call('HGET', q.overflowed, 'closed:' .. sid)
redis.call('HDEL', q.overflowed, 'dropped:' .. sid, 'closed:' .. sid)
if closed then
  return {-1, 0, 0, dropped, 'closed:' .. closed}
end
local live = nil
if ARGV[3] ~= '' then
  live = ARGV[3] == '1'
end
local published = tonumber(redis.call('HGET', q.meta, 'published') or '0')
if not redis.call('HGET', q.limits, sid) then  -- no limits: just the queue
  if redis.call('EXISTS', q.stream) == 0 then
    return {-1, 0, 0, dropped, ''}
  end
  if ARGV[4] == '0' then
    return {0, 0, 0, dropped, ''}
  end
  local depth, pending = session_queue(q.stream, '~session:' .. sid, all_groups(q.stream))
  return {depth or -1, pending, 0, dropped, ''}
end
local depth, pending, limit = check_queue(q, sid, published, live, new_look(q))
return {depth, pending, limit, dropped, ''}
