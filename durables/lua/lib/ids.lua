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

local MAX_SEQ = '18446744073709551615'
local LAST_ID = MAX_SEQ .. '-' .. MAX_SEQ  -- no stream ever grows past it

-- A decimal string plus one, exactly (a sequence number may exceed a double's 53 bits).
local function increment(digits)
  local out, carry = {}, 1
  for i = #digits, 1, -1 do
    local d = string.byte(digits, i) - 48 + carry
    carry = d >= 10 and 1 or 0
    out[i] = string.char(48 + d % 10)
  end
  local result = table.concat(out)
  return carry == 1 and ('1' .. result) or result
end

-- The smallest id after a canonical `id`: the next sequence, or the next millisecond's
-- first after the largest sequence.
local function id_after(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  if seq == MAX_SEQ then
    return increment(ms) .. '-0'
  end
  return ms .. '-' .. increment(seq)
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
