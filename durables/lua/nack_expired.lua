#!lua flags=allow-oom
-- Housekeeping for ack-required events (Diffusion's client reconnection: the non-acknowledgement is notified when
-- the timeout expires): every session's event whose ack timeout has passed (its id's time
-- plus its 'a' field, on the server's clock). One sent and not acknowledged (pending) is
-- taken off the session's queue and recorded as a nack with reason 'timeout'. One not sent
-- yet to a session that is away (its consumer idle past the lease, or none: a live one
-- nacks such events itself as it reads them) is noted in the unsent zset and returned:
-- the caller, who knows the session's interests, records it with nack.lua
-- ('expired_before_sent'), and the session, if it comes back, skips it without a second
-- nack. Notes of events the group has passed are pruned here.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's nack stream
-- KEYS[3]  the channel's meta hash ('ackreq' says the channel has had such events)
-- KEYS[4]  the channel's unsent zset ('<session id> <event id>', score 0)
-- ARGV[1]  the lease in milliseconds (a session's consumer idle longer is away)
-- Returns  {nacks recorded, {session id, event id, key ('' for none)} for each event noted
--          as unsent now}.
-- Errors   none of its own.
--@include clock
--@include ids
--@include fields
-- Per round: pending events looked at per session, and unread ones over all sessions (the
-- first ones of each away session's queue: an expired event further back is found once the
-- queue before it has moved).
local MAX_PENDING, MAX_UNREAD = 1000, 10000
local lease_ms = tonumber(ARGV[1])
local budget = MAX_UNREAD
if redis.call('HGET', KEYS[3], 'ackreq') ~= '1' or redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, {}}
end
local now, recorded, noted = now_ms(), 0, {}

local function expired(id, timeout)
  return timeout and now > tonumber(string.match(id, '^(%d+)-')) + timeout
end

-- Whether a session's group has no consumer active within the lease.
local function away(group)
  for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], group)) do
    for i = 1, #c, 2 do
      if c[i] == 'idle' and c[i + 1] < lease_ms then
        return false
      end
    end
  end
  return true
end

-- Events sent and not acknowledged in time.
local function sent(group, sid)
  for _, p in ipairs(redis.call('XPENDING', KEYS[1], group, '-', '+', MAX_PENDING)) do
    local id = p[1]
    local entry = redis.call('XRANGE', KEYS[1], id, id)[1]
    if entry and expired(id, tonumber(field(entry[2], 'a'))) then
      redis.call('XACK', KEYS[1], group, id)
      redis.call('XADD', KEYS[2], 'MAXLEN', '~', 10000, '*',
        'event', id, 'session', sid, 'reason', 'timeout')
      recorded = recorded + 1
    end
  end
end

-- Events not sent yet whose timeout passed (scanned when `scan`); notes of events the group
-- has passed are dropped.
local function unsent(sid, last, scan)
  local low, high = '[' .. sid .. ' ', '(' .. sid .. '!'  -- ids hold no ' ' or '!'
  for _, member in ipairs(redis.call('ZRANGEBYLEX', KEYS[4], low, high)) do
    local id = string.sub(member, #sid + 2)
    if not id_before(last, id) then
      redis.call('ZREM', KEYS[4], member)
    end
  end
  if not scan or budget <= 0 then
    return
  end
  local entries = redis.call('XRANGE', KEYS[1], '(' .. last, '+', 'COUNT', budget)
  budget = budget - #entries
  for _, entry in ipairs(entries) do
    local id = entry[1]
    if expired(id, tonumber(field(entry[2], 'a')))
        and redis.call('ZADD', KEYS[4], 'NX', 0, sid .. ' ' .. id) == 1 then
      noted[#noted + 1] = {sid, id, field(entry[2], 'k') or ''}
    end
  end
end

for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local info = {}
  for i = 1, #g, 2 do
    info[g[i]] = g[i + 1]
  end
  local group = info['name']
  if string.sub(group, 1, 9) == '~session:' then
    local sid = string.sub(group, 10)
    if info['pending'] > 0 then
      sent(group, sid)
    end
    unsent(sid, info['last-delivered-id'], info['lag'] ~= 0 and away(group))  -- lag nil: unknown
  end
end
return {recorded, noted}
