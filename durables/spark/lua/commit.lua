#!lua
-- Commit what Spark's tasks staged for one batch to a channel, exactly once: unless the
-- sink's record says this batch (or a later one) is in, append the staged events in
-- order and record the batch; the staging lists are deleted either way. One atomic
-- step, so a batch that Spark runs again after a crash is never published twice.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's meta hash
-- KEYS[3]  the channel's last-value hash (keyed channels)
-- KEYS[4]  the channel's last-id hash (keyed channels)
-- KEYS[5]  the channel's Spark sink record (hash: sink id -> last committed batch id)
-- KEYS[6]  the channel's session trip points   } session queue limits, checked as a
-- KEYS[7]  the channel's session queue limits  } publish checks them
-- KEYS[8]  the channel's overflowed sessions   } (lib/queue_limits.lua)
-- KEYS[9..] staging lists, in partition order: data, key ('' = none), properties
--          ('' = none) for each event
-- ARGV[1]  sink id ('' = a batch write: nothing to record or check)
-- ARGV[2]  batch id
-- ARGV[3]  how many events the tasks staged in all
-- Returns  {1 appended or 0 skipped, events appended, the sink's last batch id}.
-- Errors   NOCHANNEL, FULL <capacity>, STAGELOST (a staging list expired or vanished).
--@include clock
--@include groups
--@include queue_limits
local meta = redis.call('HMGET', KEYS[2], 'created_ms', 'capacity', 'full', 'keyed')
if not meta[1] then
  return redis.error_reply('NOCHANNEL the channel does not exist')
end
local stream, sink, batch = KEYS[1], ARGV[1], tonumber(ARGV[2])
local stages = {}
for i = 9, #KEYS do
  stages[#stages + 1] = KEYS[i]
end
local function drop_stages()
  if #stages > 0 then
    redis.call('DEL', unpack(stages))
  end
end
if sink ~= '' then
  local done = tonumber(redis.call('HGET', KEYS[5], sink) or '-1')
  if batch <= done then
    drop_stages()
    return {0, 0, done}
  end
end
local n = 0
for _, stage in ipairs(stages) do
  n = n + redis.call('LLEN', stage) / 3
end
if n ~= tonumber(ARGV[3]) then
  drop_stages()
  return redis.error_reply('STAGELOST staged ' .. ARGV[3] .. ' events, found ' .. n)
end
local capacity = tonumber(meta[2])
if capacity and meta[3] ~= 'drop_oldest' and redis.call('XLEN', stream) + n > capacity then
  drop_stages()
  return redis.error_reply('FULL ' .. capacity)
end
local keyed = meta[4] == '1'
for _, stage in ipairs(stages) do
  local length = redis.call('LLEN', stage)
  for first = 0, length - 1, 3000 do
    local values = redis.call('LRANGE', stage, first, first + 2999)
    for i = 1, #values, 3 do
      local data, key, props = values[i], values[i + 1], values[i + 2]
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
      if keyed and key ~= '' then
        redis.call('HSET', KEYS[3], key, data)
        redis.call('HSET', KEYS[4], key, id)
      end
    end
  end
end
drop_stages()
if capacity and meta[3] == 'drop_oldest' then
  redis.call('XTRIM', stream, 'MAXLEN', capacity)
end
if sink ~= '' then
  redis.call('HSET', KEYS[5], sink, batch)
end
local published = redis.call('HINCRBY', KEYS[2], 'published', n)
check_trips({stream = stream, meta = KEYS[2], trips = KEYS[6], limits = KEYS[7],
  overflowed = KEYS[8]}, published)
return {1, n, batch}
