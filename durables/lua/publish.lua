-- Append events to a channel's stream, honouring the channel's capacity rule; a keyed
-- channel also keeps the last value (and its event id) of every key.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's meta hash
-- KEYS[3]  the channel's session trip points (zset: session id -> publish count to check at)
-- KEYS[4]  the channel's session queue limits (hash, lib/queue_limits.lua)
-- KEYS[5]  the channel's overflowed sessions (hash)
-- KEYS[6]  the channel's last-value hash (key -> data), used when the channel is keyed
-- KEYS[7]  the channel's last-id hash (key -> event id), used when the channel is keyed
-- KEYS[8]  the channel's producer message ids (hash: message id -> event id)
-- KEYS[9]  the channel's producer message ids by time (zset: message id -> server ms)
--          KEYS[6..9] are used by 'k' and 'x' events alone: a call of 'd' and 'p' events
--          may name only the first five (each key costs the server about 1,200
--          instructions, 6 % of a single publish).
-- ARGV[1]  the dedupe window in milliseconds
-- ARGV[2]  the shape: one letter per event, saying which values follow for it (most
--          events carry only a payload and perhaps properties, so they take one or two):
--          'd'  data
--          'p'  data, properties as JSON
--          'k'  data, key, properties ('' = none)
--          'x'  data, key ('' = none), properties ('' = none),
--               op ('' = an ordinary event, 'destroy' = a tombstone: the key's value is
--               gone, 'ack:<ms>' = an ack-required event: each interested session
--               acknowledges it within <ms>, stored as field 'a'; the meta hash notes
--               'ackreq' for housekeeping),
--               the producer's message id ('' = none): one seen within the window is not
--               stored again, and the first event's id is returned for it.
-- ARGV[3..] the events' values, in order.
-- Returns  the event ids, in order.
-- Errors   NOCHANNEL (no meta: the channel was deleted), FULL <capacity> (rule 'reject').
-- While a session has a queue limit on the channel (a trip point), the meta hash counts
-- the events published ('published') and sessions whose queue may have reached its
-- limit are checked (lib/queue_limits.lua). Trip points are relative to that count, so it
-- need not move while there are none: a publish then writes nothing but its events (one
-- write for the server to log and pass to replicas, not a transaction of several).
-- The libraries are spliced into the branches that use them: defining their functions
-- costs the server time at every call (about 1.7 µs), and most publishes need neither.
local meta = redis.call('HMGET', KEYS[2], 'created_ms', 'capacity', 'full', 'keyed', 'moves')
if not meta[1] then
  return redis.error_reply('NOCHANNEL the channel does not exist')
end
local shape = ARGV[2]
local n = #shape
local capacity = tonumber(meta[2])
if capacity and meta[3] ~= 'drop_oldest' and redis.call('XLEN', KEYS[1]) + n > capacity then
  return redis.error_reply('FULL ' .. capacity)
end
local call, byte = redis.call, string.byte
local stream, keyed = KEYS[1], meta[4] == '1'
local window, now = tonumber(ARGV[1]), nil

-- Any event but the plainest: a key, an op or a message id. Made only for a call that has
-- one: making the closure costs the server about 3,000 instructions, 4 % of a single
-- publish. (Its body is not indented under the `if`: the `--@include` in it must start its
-- line.)
local publish_one
if string.find(shape, '[kx]') then
publish_one = function(data, key, props, op, mid)
  local id
  if mid ~= '' then
    if now == nil then
--@include clock
      now = now_ms()
      local old = call('ZRANGEBYSCORE', KEYS[9], '-inf', now - window, 'LIMIT', 0, 1000)
      if #old > 0 then
        call('HDEL', KEYS[8], unpack(old))
        call('ZREM', KEYS[9], unpack(old))
      end
    end
    id = call('HGET', KEYS[8], mid)
    if id then
      return id  -- stored before: its first id stands
    end
  end
  if op == 'destroy' then
    id = call('XADD', stream, '*', 'd', data, 'k', key, 'o', op)
  else
    local fields = {'d', data}
    if op ~= '' then  -- 'ack:<ms>'
      fields[3], fields[4] = 'a', string.sub(op, 5)
      call('HSET', KEYS[2], 'ackreq', 1)
    end
    if key ~= '' then
      fields[#fields + 1], fields[#fields + 2] = 'k', key
    end
    if props ~= '' then
      fields[#fields + 1], fields[#fields + 2] = 'p', props
    end
    id = call('XADD', stream, '*', unpack(fields))
  end
  if mid ~= '' then
    call('HSET', KEYS[8], mid, id)
    call('ZADD', KEYS[9], now, mid)
  end
  if keyed and key ~= '' then
    if op == 'destroy' then
      call('HDEL', KEYS[6], key)
      call('HDEL', KEYS[7], key)
    else
      call('HSET', KEYS[6], key, data)
      call('HSET', KEYS[7], key, id)
    end
  end
  return id
end
end

local DATA, PROPS, KEYED = byte('d'), byte('p'), byte('k')
local ids = {}
local at = 3
for i = 1, n do
  local s = byte(shape, i)
  if s == PROPS then
    ids[i] = call('XADD', stream, '*', 'd', ARGV[at], 'p', ARGV[at + 1])
    at = at + 2
  elseif s == DATA then
    ids[i] = call('XADD', stream, '*', 'd', ARGV[at])
    at = at + 1
  elseif s == KEYED then
    ids[i] = publish_one(ARGV[at], ARGV[at + 1], ARGV[at + 2], '', '')
    at = at + 3
  else  -- 'x'
    ids[i] = publish_one(ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4])
    at = at + 5
  end
end
if capacity and meta[3] == 'drop_oldest' then
  call('XTRIM', stream, 'MAXLEN', capacity)
end
if call('EXISTS', KEYS[3]) == 1 then  -- a session has a queue limit here
--@include clock
--@include queue_limits
  local published = call('HINCRBY', KEYS[2], 'published', n)
  check_trips({stream = stream, meta = KEYS[2], trips = KEYS[3], limits = KEYS[4],
    overflowed = KEYS[5], moves = meta[5] or '0'}, published,
    not string.find(shape, 'x', 1, true) and ids or nil)  -- a message id seen: an old id
end
return ids
