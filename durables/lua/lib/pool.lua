-- Library (`--@include pool`): moving pending events between the consumers of a durable
-- (any kind: exclusive takeovers use it too). Events of a shared or serial durable that wait
-- to be dealt (again) are pending under the pseudo-consumer '_pool', so they keep holding
-- back retention, and are listed in order in the redo list. No globals needed: functions
-- take the stream, the group (durable name) and the keys they touch as arguments.
local POOL = '_pool'
local CHUNK = 1000

-- Every pending id of one consumer, in id order.
local function pending_of(stream, group, consumer)
  local ids, start = {}, '-'
  repeat
    local page = redis.call('XPENDING', stream, group, start, '+', CHUNK, consumer)
    for _, entry in ipairs(page) do
      ids[#ids + 1] = entry[1]
    end
    if #page > 0 then
      start = '(' .. page[#page][1]
    end
  until #page < CHUNK
  return ids
end

-- Give pending ids to a consumer (JUSTID: the PEL's own count is not ours to raise);
-- returns the ids that were still pending (acked or trimmed ones drop out).
local function claim(stream, group, consumer, ids)
  local moved = {}
  for i = 1, #ids, CHUNK do
    local args = {'XCLAIM', stream, group, consumer, 0}
    for j = i, math.min(i + CHUNK - 1, #ids) do
      args[#args + 1] = ids[j]
    end
    args[#args + 1] = 'JUSTID'
    for _, id in ipairs(redis.call(unpack(args))) do
      moved[#moved + 1] = id
    end
  end
  return moved
end

-- `command key values...` in calls of CHUNK values at most (none for no values).
local function in_chunks(command, key, values)
  for i = 1, #values, CHUNK do
    redis.call(command, key, unpack(values, i, math.min(i + CHUNK - 1, #values)))
  end
end

-- Put ids at the head of a list, keeping their order (ids[1] ends up first).
local function push_front(list, ids)
  for i = #ids, 1, -CHUNK do
    local part = {}
    for j = i, math.max(1, i - CHUNK + 1), -1 do
      part[#part + 1] = ids[j]
    end
    redis.call('LPUSH', list, unpack(part))
  end
end

-- A consumer's pending events that were delivered before, as a flat list id, count, ...
-- (`counts` holds only ids counted above zero; usually it does not exist at all).
-- `present`: false if the caller knows `counts` does not exist (nil: it is looked at).
local function redelivered_of(stream, group, counts, consumer, present)
  local redelivered, mine = {}, {}
  if present ~= false and redis.call('EXISTS', counts) == 1 then
    mine = pending_of(stream, group, consumer)
  end
  if #mine > 0 then
    local values = redis.call('HMGET', counts, unpack(mine))
    for i, id in ipairs(mine) do
      if values[i] then
        redelivered[#redelivered + 1] = id
        redelivered[#redelivered + 1] = values[i]
      end
    end
  end
  return redelivered
end
