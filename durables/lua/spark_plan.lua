-- Plan a Spark micro-batch over a durable: hand the events after `start` to the Spark
-- reader (the group's position moves and they enter its pending list, so depth and
-- transaction depth stay true) and say where the batch ends. Events already handed out
-- after `start` (a batch planned before a crash and never checkpointed, or events
-- consumers held unacknowledged before the query began) are planned again first.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's durables hash
-- KEYS[3]  the durable's lease (exclusive durables)
-- KEYS[4]  the durable's alive zset (shared and serial durables)
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the Spark reader's token: its consumer name, and its lease value
-- ARGV[3]  lease length in ms for an exclusive durable ('' = shared or serial: no lease)
-- ARGV[4]  the batch's start: the last id of the batch before (exclusive)
-- ARGV[5]  at most this many events
-- ARGV[6]  the last id the batch may reach ('' = no bound)
-- Returns  {end id, events in (start, end], the group's position before this call, the ids
--          handed out in (start, end] (acknowledged by them when Spark commits)}.
-- Errors   NODURABLE, NOGROUP, INUSE <holder>.
--@include ids
local stream, group, token = KEYS[1], ARGV[1], ARGV[2]
if redis.call('HEXISTS', KEYS[2], group) == 0 then
  return redis.error_reply('NODURABLE the durable does not exist')
end
if ARGV[3] ~= '' then
  local holder = redis.call('GET', KEYS[3])
  if holder and holder ~= token then
    return redis.error_reply('INUSE ' .. holder)
  end
  redis.call('SET', KEYS[3], token, 'PX', ARGV[3])
else
  local now = redis.call('TIME')
  local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  local live = redis.call('ZRANGEBYSCORE', KEYS[4], now_ms, '+inf', 'LIMIT', 0, 1)
  if #live > 0 then
    return redis.error_reply('INUSE ' .. live[1])
  end
end

local function group_position()
  for _, info in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local fields = {}
    for i = 1, #info, 2 do
      fields[info[i]] = info[i + 1]
    end
    if fields['name'] == group then
      return fields['last-delivered-id']
    end
  end
  return nil
end

local start, want, bound = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local before = group_position()
if not before then
  return redis.error_reply('NOGROUP the durable has no consumer group')
end
if id_before(before, start) then
  -- the checkpoint is ahead of the durable (its acknowledgements were lost): trust it
  redis.call('XGROUP', 'SETID', stream, group, start)
  before = start
end
local last, count, ids = start, 0, {}
if id_before(start, before) then
  local hi = before
  if bound ~= '' and id_before(bound, hi) then
    hi = bound
  end
  local again = redis.call('XRANGE', stream, '(' .. start, hi, 'COUNT', want)
  count = #again
  for i, entry in ipairs(again) do
    ids[i] = entry[1]
  end
  if count > 0 then
    last = again[count][1]
  end
end
local take = want - count
if take > 0 and bound ~= '' and id_before(bound, newest_id(stream)) then
  -- events came after the bound: count those up to it (moving every entry through Lua
  -- costs what reading it does, so only when the bound cuts the stream)
  take = id_before(before, bound) and #redis.call('XRANGE', stream, '(' .. before, bound, 'COUNT', take) or 0
end
-- in slices: a reply of half a million entries would be held in Lua at once
local SLICE = 10000
while take > 0 do
  local asked = math.min(take, SLICE)
  local got = redis.call('XREADGROUP', 'GROUP', group, token, 'COUNT', asked, 'STREAMS', stream, '>')
  local entries = got and got[1][2] or {}
  for _, entry in ipairs(entries) do
    ids[#ids + 1] = entry[1]
  end
  if #entries > 0 then
    count = count + #entries
    last = entries[#entries][1]
  end
  take = #entries < asked and 0 or take - #entries
end
return {last, count, before, ids}
