-- Append events to a channel's stream, honouring the channel's capacity rule; a keyed
-- channel also keeps the last value (and its event id) of every key.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's meta hash
-- KEYS[3]  the channel's last-value hash (key -> data), used when the channel is keyed
-- KEYS[4]  the channel's last-id hash (key -> event id), used when the channel is keyed
-- KEYS[5]  the channel's session trip points (zset: session id -> publish count to check at)
-- KEYS[6]  the channel's session queue limits (hash, lib/queue_limits.lua)
-- KEYS[7]  the channel's overflowed sessions (hash)
-- KEYS[8]  the channel's producer message ids (hash: message id -> event id)
-- KEYS[9]  the channel's producer message ids by time (zset: message id -> server ms)
-- ARGV[1]  number of events n
-- ARGV[2]  the dedupe window in milliseconds; then 5 values per event:
--          data, key ('' = none), properties as JSON ('' = none),
--          op ('' = an ordinary event, 'destroy' = a tombstone: the key's value is gone,
--          'ack:<ms>' = an ack-required event: each interested session acknowledges it
--          within <ms>, stored as field 'a'; the meta hash notes 'ackreq' for housekeeping),
--          the producer's message id ('' = none): one seen within the window is not
--          stored again, and the first event's id is returned for it.
-- Returns  the event ids, in order.
-- Errors   NOCHANNEL (no meta: the channel was deleted), FULL <capacity> (rule 'reject').
-- The meta hash counts the events ever published ('published'); sessions whose queue may
-- have reached its limit are checked (lib/queue_limits.lua).
--@include clock
--@include queue_limits
local meta = redis.call('HMGET', KEYS[2], 'created_ms', 'capacity', 'full', 'keyed')
if not meta[1] then
  return redis.error_reply('NOCHANNEL the channel does not exist')
end
local n = tonumber(ARGV[1])
local capacity = tonumber(meta[2])
if capacity and meta[3] ~= 'drop_oldest' and redis.call('XLEN', KEYS[1]) + n > capacity then
  return redis.error_reply('FULL ' .. capacity)
end
local stream, keyed = KEYS[1], meta[4] == '1'
local window, now = tonumber(ARGV[2]), nil
local ids = {}
for i = 0, n - 1 do
  local at = 3 + i * 5
  local data, key, props, op, mid = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
  local id
  if mid ~= '' then
    if now == nil then
      now = now_ms()
      local old = redis.call('ZRANGEBYSCORE', KEYS[9], '-inf', now - window, 'LIMIT', 0, 1000)
      if #old > 0 then
        redis.call('HDEL', KEYS[8], unpack(old))
        redis.call('ZREM', KEYS[9], unpack(old))
      end
    end
    id = redis.call('HGET', KEYS[8], mid)
  end
  if id then
    op = 'seen'  -- stored before: its first id stands
  elseif op == 'destroy' then
    id = redis.call('XADD', stream, '*', 'd', data, 'k', key, 'o', op)
  elseif op ~= '' then  -- 'ack:<ms>'
    local fields = {'d', data, 'a', string.sub(op, 5)}
    if key ~= '' then
      fields[#fields + 1], fields[#fields + 2] = 'k', key
    end
    if props ~= '' then
      fields[#fields + 1], fields[#fields + 2] = 'p', props
    end
    id = redis.call('XADD', stream, '*', unpack(fields))
    redis.call('HSET', KEYS[2], 'ackreq', 1)
  elseif key == '' and props == '' then
    id = redis.call('XADD', stream, '*', 'd', data)
  elseif props == '' then
    id = redis.call('XADD', stream, '*', 'd', data, 'k', key)
  elseif key == '' then
    id = redis.call('XADD', stream, '*', 'd', data, 'p', props)
  else
    id = redis.call('XADD', stream, '*', 'd', data, 'k', key, 'p', props)
  end
  if mid ~= '' and op ~= 'seen' then
    redis.call('HSET', KEYS[8], mid, id)
    redis.call('ZADD', KEYS[9], now, mid)
  end
  if keyed and key ~= '' and op ~= 'seen' then
    if op == 'destroy' then
      redis.call('HDEL', KEYS[3], key)
      redis.call('HDEL', KEYS[4], key)
    else
      redis.call('HSET', KEYS[3], key, data)
      redis.call('HSET', KEYS[4], key, id)
    end
  end
  ids[i + 1] = id
end
if capacity and meta[3] == 'drop_oldest' then
  redis.call('XTRIM', stream, 'MAXLEN', capacity)
end
local published = redis.call('HINCRBY', KEYS[2], 'published', n)
check_trips({stream = stream, meta = KEYS[2], trips = KEYS[5], limits = KEYS[6],
  overflowed = KEYS[7]}, published)
return ids
