#!lua flags=allow-oom
-- Commit a durable up to an id: Spark has committed every batch up to it. The group's
-- position moves to it (with the count of entries read, so the durable's lag stays exact
-- when the batch's record knows it), the planned batches up to it are forgotten, and any
-- event still pending up to it (handed out to consumers before the query began) is
-- acknowledged, its redelivery bookkeeping with it.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's redelivery counts
-- KEYS[3]  the durable's keep set
-- KEYS[4]  the durable's planned batches (plan.lua)
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the id up to which (inclusive) Spark committed
-- Returns  how many events were acknowledged: planned ones and pending ones.
-- Errors   NOGROUP.
--@include ids
--@include groups
local stream, group, upto, planned = KEYS[1], ARGV[1], ARGV[2], KEYS[4]
local acked = 0
local counted, kept = redis.call('EXISTS', KEYS[2]) == 1, redis.call('EXISTS', KEYS[3]) == 1
repeat
  local pending = redis.call('XPENDING', stream, group, '-', upto, 1000)
  if #pending == 0 then
    break
  end
  local ids = {}
  for i, entry in ipairs(pending) do
    ids[i] = entry[1]
  end
  acked = acked + redis.call('XACK', stream, group, unpack(ids))
  if counted then
    redis.call('HDEL', KEYS[2], unpack(ids))
  end
  if kept then
    redis.call('SREM', KEYS[3], unpack(ids))
  end
until #pending < 1000

local found = all_groups(stream)[group]
local position = found and group_info(found)['last-delivered-id']
if not position then
  return redis.error_reply('NOGROUP the durable has no consumer group')
end
local done, flat = {}, redis.call('HGETALL', planned)
for i = 1, #flat, 2 do
  local last = flat[i]
  if not id_before(upto, last) then
    done[#done + 1] = last
    if id_before(position, last) then
      acked = acked + tonumber(string.match(flat[i + 1], '^(%S+)'))
    end
  end
end
if id_before(position, upto) then
  local record = redis.call('HGET', planned, upto)
  local read = record and tonumber(string.match(record, '^%S+ (%S+)')) or -1
  if read >= 0 then
    redis.call('XGROUP', 'SETID', stream, group, upto, 'ENTRIESREAD', string.format('%.0f', read))
  else
    redis.call('XGROUP', 'SETID', stream, group, upto)
  end
end
if #done > 0 then
  redis.call('HDEL', planned, unpack(done))
end
return acked
