-- Append events to a channel's stream, honouring the channel's capacity rule.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's meta hash
-- ARGV[1]  number of events n; then 3 values per event:
--          data, key ('' = none), properties as JSON ('' = none)
-- Returns  the new event ids, in order.
-- Errors   NOCHANNEL (no meta: the channel was deleted), FULL <capacity> (rule 'reject').
local meta = redis.call('HMGET', KEYS[2], 'created_ms', 'capacity', 'full')
if not meta[1] then
  return redis.error_reply('NOCHANNEL the channel does not exist')
end
local n = tonumber(ARGV[1])
local capacity = tonumber(meta[2])
if capacity and meta[3] ~= 'drop_oldest' and redis.call('XLEN', KEYS[1]) + n > capacity then
  return redis.error_reply('FULL ' .. capacity)
end
local stream = KEYS[1]
local ids = {}
for i = 0, n - 1 do
  local data, key, props = ARGV[2 + i * 3], ARGV[3 + i * 3], ARGV[4 + i * 3]
  local id
  if key == '' and props == '' then
    id = redis.call('XADD', stream, '*', 'd', data)
  elseif props == '' then
    id = redis.call('XADD', stream, '*', 'd', data, 'k', key)
  elseif key == '' then
    id = redis.call('XADD', stream, '*', 'd', data, 'p', props)
  else
    id = redis.call('XADD', stream, '*', 'd', data, 'k', key, 'p', props)
  end
  ids[i + 1] = id
end
if capacity and meta[3] == 'drop_oldest' then
  redis.call('XTRIM', stream, 'MAXLEN', capacity)
end
return ids
