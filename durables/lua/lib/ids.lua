-- Library (`--@include ids`): stream ids compared and stepped as (ms, seq) pairs, and a
-- stream's newest id. No globals needed.
local function split_id(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end

local function id_before(a, b)
  local ams, aseq = split_id(a)
  local bms, bseq = split_id(b)
  return ams < bms or (ams == bms and aseq < bseq)
end

local function id_after(id)
  local ms, seq = split_id(id)
  return string.format('%.0f-%.0f', ms, seq + 1)
end

local function id_below(id)
  local ms, seq = split_id(id)
  if seq > 0 then
    return string.format('%.0f-%.0f', ms, seq - 1)
  end
  return string.format('%.0f', ms - 1) .. '-18446744073709551615'
end

local function sort_ids(ids)
  table.sort(ids, id_before)
  return ids
end

-- The id of a stream's newest entry, '0-0' when it has none (or does not exist).
local function newest_id(stream)
  local newest = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
  return newest[1] and newest[1][1] or '0-0'
end
