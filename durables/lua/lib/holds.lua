-- Library (`--@include holds`): which event of each key a keyed durable has out.
-- d.holds is one hash with two kinds of field:
--   'k:<key>' -> the id of the key's event out (set when dealt);
--   'i:<id>'  -> the key of an event dealt or waiting (so neither an acknowledgement nor
--                a look at the redo list reads the event itself).
-- Acknowledgements (the dispatcher's, and those sent on their own) clear both
-- (keyed_acked); one made elsewhere (a dead letter, a purge) is found when the key's next
-- event is looked at: its 'k:' names an event no longer pending, and the key is free.

-- HMGET of `prefix .. name` for each name (none: an empty table).
local function prefixed(hash, prefix, names)
  if #names == 0 then
    return {}
  end
  local fields = {}
  for i, name in ipairs(names) do
    fields[i] = prefix .. name
  end
  return redis.call('HMGET', hash, unpack(fields))
end

-- Acknowledged events no longer hold their keys (the ids the dispatcher acknowledged).
local function keyed_acked(d, ids)
  local keys = prefixed(d.holds, 'i:', ids)
  local known, gone = {}, {}
  for i, key in ipairs(keys) do
    if key then
      known[#known + 1] = key
      gone[#gone + 1] = 'i:' .. ids[i]
    end
  end
  if #known == 0 then
    return
  end
  local outs = prefixed(d.holds, 'k:', known)
  local acked = {}
  for _, id in ipairs(ids) do
    acked[id] = true
  end
  for i, key in ipairs(known) do
    if outs[i] and acked[outs[i]] then
      gone[#gone + 1] = 'k:' .. key
    end
  end
  redis.call('HDEL', d.holds, unpack(gone))
end
