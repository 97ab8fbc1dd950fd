#!lua flags=allow-oom
-- Plan a Spark micro-batch over a durable: find where the next batch after `start` ends and
-- note the batch in the durable's planned batches. Nothing enters the pending list and the
-- group's position stays where Spark's last commit put it (ack.lua moves it), so the
-- planned events stay on the channel (retention keeps what is after a group's position)
-- and the durable's figures count them as handed out from that record. Batches noted after
-- `start` (planned before a crash and never run) are planned again: their events are
-- reported as handed out before.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's durables hash
-- KEYS[3]  the durable's lease (exclusive durables)
-- KEYS[4]  the durable's alive zset (shared and serial durables)
-- KEYS[5]  the durable's planned batches (hash: last id -> '<events> <entries read at it>
--          <first id>'; events counts only those after the group's position)
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the Spark reader's token: its lease value on an exclusive durable
-- ARGV[3]  lease length in ms for an exclusive durable ('' = shared or serial: no lease)
-- ARGV[4]  the batch's start: the last id of the batch before (exclusive)
-- ARGV[5]  at most this many events
-- ARGV[6]  the last id the batch may reach ('' = no bound)
-- Returns  {end id, events in (start, end], the id up to which events of the batch had
--          been handed out before}.
-- Errors   NODURABLE, NOGROUP, INUSE <holder>.
--@include ids
--@include groups
local stream, group, token, planned = KEYS[1], ARGV[1], ARGV[2], KEYS[5]
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

local found = all_groups(stream)[group]
local fields = found and group_info(found) or {}
local position, lag = fields['last-delivered-id'], tonumber(fields['lag'])
if not position then
  return redis.error_reply('NOGROUP the durable has no consumer group')
end
-- a group made at the start shows no count of entries read, but a lag: the count
local read = (lag and read_counter(stream, fields, lag)) or tonumber(fields['entries-read']) or -1

local start, want, bound = ARGV[4], tonumber(ARGV[5]), ARGV[6]
-- batches up to the position were committed (or consumed since); those past `start` are
-- planned again now; the one ending at `start` is the batch before this one
local seen, base, void, flat = position, nil, {}, redis.call('HGETALL', planned)
for i = 1, #flat, 2 do
  local last = flat[i]
  if not id_before(position, last) then
    void[#void + 1] = last
  elseif id_before(start, last) then
    void[#void + 1] = last
    if id_before(seen, last) then
      seen = last
    end
  elseif last == start then
    base = tonumber(string.match(flat[i + 1], '^%S+ (%S+)'))
  end
end
if #void > 0 then
  redis.call('HDEL', planned, unpack(void))
end
if start == position then
  base = read
elseif id_before(start, position) then
  base = read  -- events up to the position were handed out before: counted from it
elseif base == nil then
  -- the checkpoint is ahead of the durable and no batch of ours ends there (the durable's
  -- commits were lost): trust the checkpoint
  redis.call('XGROUP', 'SETID', stream, group, start)
  position, base = start, -1
end

-- the end: the `want`-th entry after `start`, found in slices (a reply of half a million
-- entries would be held in Lua at once); only ids are kept
local SLICE = 10000
local last, count, new, first = start, 0, 0, nil
local low, high = '(' .. start, bound ~= '' and bound or '+'
while count < want do
  local asked = math.min(want - count, SLICE)
  local entries = redis.call('XRANGE', stream, low, high, 'COUNT', asked)
  local got = #entries
  if got == 0 then
    break
  end
  if first == nil then
    first = entries[1][1]
  end
  last = entries[got][1]
  count = count + got
  if id_before(position, entries[1][1]) then
    new = new + got
  else
    for _, entry in ipairs(entries) do
      if id_before(position, entry[1]) then
        new = new + 1
      end
    end
  end
  if got < asked then
    break
  end
  low = '(' .. last
end
if new > 0 then
  local at = base >= 0 and string.format('%.0f', base + new) or '-1'
  redis.call('HSET', planned, last, new .. ' ' .. at .. ' ' .. first)
end
return {last, count, seen}
