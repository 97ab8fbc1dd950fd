-- Library (`--@include dead_letters`): events given up on. An event handed back for
-- redelivery `max_deliveries` times goes to the durable's dead-letter stream instead, with
-- its fields and where it came from, and leaves the group. Needs `d` with d.stream,
-- d.group, d.counts (hash: id -> redeliveries) and d.dead (the dead-letter stream).

-- Bury a waiting event if its count reached `limit` (nil: no limit); true if it went.
local function bury(d, limit, id)
  local count = tonumber(redis.call('HGET', d.counts, id) or 0)
  if limit == nil or count < limit then
    return false
  end
  local entry = redis.call('XRANGE', d.stream, id, id)
  if #entry > 0 then
    local fields = entry[1][2]
    fields[#fields + 1] = 'origin'
    fields[#fields + 1] = id
    fields[#fields + 1] = 'reason'
    fields[#fields + 1] = 'max_deliveries'
    fields[#fields + 1] = 'deliveries'
    fields[#fields + 1] = tostring(count)
    redis.call('XADD', d.dead, '*', unpack(fields))
  end
  redis.call('XACK', d.stream, d.group, id)
  redis.call('HDEL', d.counts, id)
  return true
end
