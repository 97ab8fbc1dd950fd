-- Append events to a channel's stream, honouring the channel's capacity rule; a keyed
-- channel also keeps the last value (and its event id) of every key.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's meta hash
-- KEYS[3]  the channel's last-value hash (key -> data), used when the channel is keyed
-- KEYS[4]  the channel's last-id hash (key -> event id), used when the channel is keyed
-- KEYS[5]  the channel's session trip points (zset: session id -> publish count to check at)
-- KEYS[6]  the channel's session queue limits (hash, lib/queue_limits.lua)
-- KEYS[7]  the channel's overflowed sessions (hash)
-- ARGV[1]  number of events n; then 4 values per event:
--          data, key ('' = none), properties as JSON ('' = none),
--          op ('' = an ordinary event, 'destroy' = a tombstone: the key's value is gone,
--          'ack:<ms>' = an ack-required event: each interested session acknowledges it
--          within <ms>, stored as field 'a'; the meta hash notes 'ackreq' for housekeeping)
-- Returns  the new event ids, in order.
-- Errors   NOCHANNEL (no meta: the channel was deleted), FULL <capacity> (rule 'reject').
-- The meta hash counts the events ever published ('published'); sessions whose queue may
-- have reached its limit are checked (lib/queue_limits.lua).
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
local ids = {}
for i = 0, n - 1 do
  local data, key, props, op = ARGV[2 + i * 4], ARGV[3 + i * 4], ARGV[4 + i * 4], ARGV[5 + i * 4]
  local id
  if op == 'destroy' then
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
  if keyed and key ~= '' then
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
