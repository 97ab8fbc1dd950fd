-- Library (`--@include groups`): a stream's consumer groups as XINFO GROUPS gives them,
-- and a group's read counter. No globals needed.

-- Every group of the stream: name -> its XINFO GROUPS reply, fields and values in turn
-- (one call, whatever the number of sessions looked at). Only the groups looked at are
-- made into tables (group_info): a channel may have thousands.
local function all_groups(stream)
  local found = {}
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    for i = 1, #g, 2 do
      if g[i] == 'name' then  -- the first field
        found[g[i + 1]] = g
        break
      end
    end
  end
  return found
end

-- One group's XINFO GROUPS fields: field -> value.
local function group_info(flat)
  local info = {}
  for i = 1, #flat, 2 do
    info[flat[i]] = flat[i + 1]
  end
  return info
end

-- The stream's count of entries ever added.
local function entries_added(stream)
  local flat = redis.call('XINFO', 'STREAM', stream)
  for i = 1, #flat, 2 do
    if flat[i] == 'entries-added' then
      return flat[i + 1]
    end
  end
end

-- A group's read counter (`entries-read`), as XINFO GROUPS gave it, or worked out from the
-- stream's count of entries added and the group's `lag`: a group made at '$' has none
-- until it reads. Nil if it cannot be known.
local function read_counter(stream, info, lag)
  local read = info['entries-read']
  if type(read) == 'number' then
    return read
  end
  local added = entries_added(stream)
  if type(added) == 'number' and added >= lag then
    return added - lag
  end
  return nil
end
