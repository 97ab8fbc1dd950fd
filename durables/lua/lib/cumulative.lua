-- Library (`--@include cumulative`): the cumulative acknowledgement of an exclusive
-- durable: every event the holder has pending, up to and including an id, is
-- acknowledged and its redelivery bookkeeping forgotten. Returns how many.
-- No globals needed: ack_upto(stream, group, holder token, redelivery counts hash,
-- keep set, last id to acknowledge, known ids, index of the first known id).
-- The known ids are those the holder read since its last acknowledgement, all up to
-- `upto` (ARGV from `first` on): acknowledged without looking them up, which is the
-- steady path; the look-up of what is still pending then finds nothing and ends. It
-- still finds what the holder did not name (a hint lost with a reply, a re-attach).
local function ack_upto(stream, group, holder, counts, keep, upto, known, first)
  local acked, bookkeeping = 0, redis.call('EXISTS', counts, keep) > 0
  if #known >= first then
    acked = redis.call('XACK', stream, group, unpack(known, first))
    if bookkeeping then
      redis.call('HDEL', counts, unpack(known, first))
      redis.call('SREM', keep, unpack(known, first))
    end
  end
  repeat
    local pending = redis.call('XPENDING', stream, group, '-', upto, 1000, holder)
    if #pending == 0 then
      break
    end
    local ids = {}
    for i, entry in ipairs(pending) do
      ids[i] = entry[1]
    end
    acked = acked + redis.call('XACK', stream, group, unpack(ids))
    if bookkeeping then
      redis.call('HDEL', counts, unpack(ids))
      redis.call('SREM', keep, unpack(ids))
    end
  until #pending < 1000
  return acked
end
