#!lua
-- Append events to a channel's stream, honouring the channel's capacity rule; a keyed
-- channel also keeps the last value (and its event id) of every key.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's meta hash; it also holds each producer's record, field
--          '<producer id>:' -> '<sequence> <first event id>' of its last call here (read
--          with the settings: an HGET of a hash of their own cost 7 % of a single publish)
-- KEYS[3]  the channel's session trip points (zset: session id -> publish count to check at)
-- KEYS[4]  the channel's session queue limits (hash, lib/queue_limits.lua)
-- KEYS[5]  the channel's overflowed sessions (hash)
-- KEYS[6]  the channel's last-value hash (key -> data), used when the channel is keyed
-- KEYS[7]  the channel's last-id hash (key -> event id), used when the channel is keyed
-- KEYS[8]  the channel's producer message ids (hash: message id -> event id)
-- KEYS[9]  the channel's producer message ids by time (zset: message id -> server ms)
--          KEYS[6..9] are used by 'k' and 'x' events alone: a call of 'd' and 'p' events
--          may name only the first five, and only the first two where the client believes
--          no session has a trip point here (each key costs the server about 1,200
--          instructions): if one may have, TRIPS asks for the call again with KEYS[3..5].
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
-- ARGV[3]  the producer id: the client's, one per publish in flight (a lane); '' for a
--          client that publishes without idempotence (no message id is stored either)
-- ARGV[4]  the call's sequence number: the first event's; the others follow it. A lane's
--          calls arrive in sequence, so the same number again is the library's retry of a
--          call whose reply was lost (stored once: its ids are returned), and a smaller
--          one is a stale copy that landed after its retry (STALE). Every event is stored
--          with its message id, field 'm': the producer's own, or '<producer>:<sequence>'.
-- ARGV[5..] the events' values, in order.
-- Returns  the event ids, in order; a new single event's id alone, not in a table (a table
--          reply costs the server about 7,000 instructions, 7 % of a single publish).
-- Errors   NOCHANNEL (no meta: the channel was deleted), FULL <capacity> (rule 'reject'),
--          STALE (a copy of a call superseded by a later one of its producer), TRIPS (the
--          trip points' keys are needed and were not named: nothing was done).
-- The meta hash counts what the metrics export as counters: 'duplicates' (events not
-- stored again: their message id was seen within the dedupe window) and
-- 'dropped:capacity' (events a full 'drop_oldest' channel removed).
-- While a session has a queue limit on the channel (a trip point), the meta hash counts
-- the events published ('published') and sessions whose queue may have reached its
-- limit are checked (lib/queue_limits.lua). Trip points are relative to that count, so it
-- need not move while there are none: a publish then writes nothing but its events and
-- its producer's record. Whether there are any is read with the settings: the meta hash's
-- 'notrips' is '1' once a publish found none, and lib/queue_limits.lua deletes it before
-- it sets one (the EXISTS it saves is 5,700 instructions, 5 % of a single publish).
-- Numbers are made into strings only where they must be (a single event's message id is
-- '<producer>:' .. ARGV[4], as sent): formatting one costs the server about 3,000
-- instructions, reading one 1,700.
-- The libraries are spliced into the branches that use them: defining their functions
-- costs the server time at every call (about 1.7 µs), and most publishes need neither.
local producer, sent = ARGV[3], ARGV[4]
local tag = producer ~= '' and producer .. ':' or nil  -- also its record's field
local call, byte = redis.call, string.byte
local meta = tag
  and call('HMGET', KEYS[2], 'created_ms', 'capacity', 'full', 'keyed', 'moves', 'notrips', tag)
  or call('HMGET', KEYS[2], 'created_ms', 'capacity', 'full', 'keyed', 'moves', 'notrips')
if not meta[1] then
  return redis.error_reply('NOCHANNEL the channel does not exist')
end
if meta[6] ~= '1' and not KEYS[3] then
  return redis.error_reply('TRIPS a session may have a queue limit here: name its keys')
end
local shape = ARGV[2]
local n = #shape
local stream, keyed = KEYS[1], meta[4] == '1'
local now = nil
local seq = n > 1 and tonumber(sent) or nil  -- a batch's: its events' message ids follow it
local DATA, PROPS, KEYED, FULL = 100, 112, 107, 120  -- byte('d'), 'p', 'k', 'x'

-- The producer's last call here: the same sequence again is its retry, a smaller one stale.
local last = meta[7]
if last then
  local space = string.find(last, ' ', 1, true)
  local last_seq = string.sub(last, 1, space - 1)
  -- Compared as decimal strings without leading zeros (both are as the client sent them).
  if #sent < #last_seq or (#sent == #last_seq and sent < last_seq) then
    return redis.error_reply('STALE a later publish of this producer was stored first')
  end
  if sent == last_seq then
    -- Stored before: the ids it got, found by each event's message id among the entries
    -- the call appended (one atomic call: they follow its first id), or in the message
    -- ids of a producer-given id that was a duplicate then.
    local first = string.sub(last, space + 1)
    local found, ids, at = {}, {}, 5
    if first ~= '' then
      for _, entry in ipairs(call('XRANGE', stream, first, '+', 'COUNT', n)) do
        local f = entry[2]
        for j = 1, #f - 1, 2 do
          if f[j] == 'm' then
            found[f[j + 1]] = entry[1]
            break
          end
        end
      end
    end
    for i = 1, n do
      local s, mid = byte(shape, i), i == 1 and tag .. sent or tag .. (seq + i - 1)
      if s == FULL then
        if ARGV[at + 4] ~= '' then
          mid = ARGV[at + 4]
        end
        at = at + 5
      else
        at = at + (s == DATA and 1 or s == PROPS and 2 or 3)
      end
      ids[i] = found[mid] or (KEYS[8] and call('HGET', KEYS[8], mid)) or first
    end
    return ids
  end
end

local capacity = tonumber(meta[2])
if capacity and meta[3] ~= 'drop_oldest' and call('XLEN', stream) + n > capacity then
  return redis.error_reply('FULL ' .. capacity)
end
local first = nil  -- the first id this call appends

-- Any event but the plainest: a key, an op or a message id. Made only for a call that has
-- one: making the closure costs the server about 3,000 instructions, 4 % of a single
-- publish. (Its body is not indented under the `if`: the `--@include` in it must start its
-- line.)
local publish_one
if string.find(shape, 'k', 1, true) or string.find(shape, 'x', 1, true) then
publish_one = function(data, key, props, op, mid, own)
  local id
  if mid ~= '' then
    if now == nil then
--@include clock
      now = now_ms()
      local old = call('ZRANGEBYSCORE', KEYS[9], '-inf', now - tonumber(ARGV[1]), 'LIMIT', 0,
        1000)
      if #old > 0 then
        call('HDEL', KEYS[8], unpack(old))
        call('ZREM', KEYS[9], unpack(old))
      end
    end
    id = call('HGET', KEYS[8], mid)
    if id then
      call('HINCRBY', KEYS[2], 'duplicates', 1)  -- a counter for the metrics
      return id  -- stored before: its first id stands
    end
  end
  local given = mid ~= '' and mid or own
  if op == 'destroy' then
    id = given and call('XADD', stream, '*', 'd', data, 'm', given, 'k', key, 'o', op)
      or call('XADD', stream, '*', 'd', data, 'k', key, 'o', op)
  else
    local fields = {'d', data}
    if given then
      fields[3], fields[4] = 'm', given
    end
    if op ~= '' then  -- 'ack:<ms>'
      fields[#fields + 1], fields[#fields + 2] = 'a', string.sub(op, 5)
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
  first = first or id
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

local ids = {}
local at = 5
for i = 1, n do
  local s = byte(shape, i)
  local mid = tag and (i == 1 and tag .. sent or tag .. (seq + i - 1))
  if not tag then  -- no idempotence asked: no message id of the producer's own
    if s == PROPS then
      ids[i] = call('XADD', stream, '*', 'd', ARGV[at], 'p', ARGV[at + 1])
      at = at + 2
    elseif s == DATA then
      ids[i] = call('XADD', stream, '*', 'd', ARGV[at])
      at = at + 1
    elseif s == KEYED then
      ids[i] = publish_one(ARGV[at], ARGV[at + 1], ARGV[at + 2], '', '', nil)
      at = at + 3
    else
      ids[i] = publish_one(ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4], nil)
      at = at + 5
    end
  elseif s == PROPS then
    ids[i] = call('XADD', stream, '*', 'd', ARGV[at], 'm', mid, 'p', ARGV[at + 1])
    first = first or ids[i]
    at = at + 2
  elseif s == DATA then
    ids[i] = call('XADD', stream, '*', 'd', ARGV[at], 'm', mid)
    first = first or ids[i]
    at = at + 1
  elseif s == KEYED then
    ids[i] = publish_one(ARGV[at], ARGV[at + 1], ARGV[at + 2], '', '', mid)
    at = at + 3
  else  -- 'x'
    ids[i] = publish_one(ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4], mid)
    at = at + 5
  end
end
if tag and n > 0 then
  call('HSET', KEYS[2], tag, sent .. ' ' .. (first or ''))
  if not last and first then
    -- A producer new here: forget a few that have been silent for the dedupe window (ten
    -- minutes at least: longer than a retry goes on), so the hash holds the producers of
    -- the last window (O(1) each, no key per event). A record's field ends in ':', which
    -- no setting's does.
    local cut = tonumber(string.match(first, '^%d+')) - math.max(tonumber(ARGV[1]), 600000)
    local sample = call('HRANDFIELD', KEYS[2], 8, 'WITHVALUES')
    for j = 1, #sample - 1, 2 do
      if byte(sample[j], -1) == 58 then  -- ':'
        local since = tonumber(string.match(sample[j + 1], ' (%d+)%-'))
        if not since or since < cut then
          call('HDEL', KEYS[2], sample[j])
        end
      end
    end
  end
end
if capacity and meta[3] == 'drop_oldest' then
  local dropped = call('XTRIM', stream, 'MAXLEN', capacity)
  if dropped > 0 then
    call('HINCRBY', KEYS[2], 'dropped:capacity', dropped)  -- a counter for the metrics
  end
end
local reply = n == 1 and ids[1] or ids
if meta[6] == '1' then  -- no session has a queue limit here
  return reply
end
if call('EXISTS', KEYS[3]) == 0 then
  call('HSET', KEYS[2], 'notrips', '1')  -- the next publishes need not look
  return reply
end
--@include clock
--@include groups
--@include queue_limits
local published = call('HINCRBY', KEYS[2], 'published', n)
check_trips({stream = stream, meta = KEYS[2], trips = KEYS[3], limits = KEYS[4],
  overflowed = KEYS[5], moves = meta[5] or '0', tripped = true}, published,
  not string.find(shape, 'x', 1, true) and ids or nil)  -- a message id seen: an old id
return reply
