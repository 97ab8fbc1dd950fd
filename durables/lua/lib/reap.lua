-- Library (`--@include reap`, after `pool` and `ids`): the consumers of a shared or serial
-- durable whose lease lapsed are detached, and their events go back first in line with one
-- delivery more; delayed rollbacks that are due join the line too.

local function remove_member(stream, group, members, alive, ring, consumer)
  redis.call('HDEL', members, consumer)
  redis.call('ZREM', alive, consumer)
  redis.call('LREM', ring, 0, consumer)
  redis.call('XGROUP', 'DELCONSUMER', stream, group, consumer)
  if redis.call('HLEN', members) == 1 then
    redis.call('HDEL', members, '_store')  -- the last consumer left: the next first one decides
  end
end

local function reap(stream, group, members, alive, ring, redo, delayed, counts, now)
  for _, consumer in ipairs(redis.call('ZRANGEBYSCORE', alive, '-inf', now)) do
    local back = sort_ids(claim(stream, group, POOL, pending_of(stream, group, consumer)))
    for _, id in ipairs(back) do
      redis.call('HINCRBY', counts, id, 1)
    end
    push_front(redo, back)
    remove_member(stream, group, members, alive, ring, consumer)
  end
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, 1000)
  if #due > 0 then
    redis.call('ZREM', delayed, unpack(due))
    push_front(redo, sort_ids(due))
  end
end
