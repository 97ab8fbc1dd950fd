-- Library (`--@include reap`, after `ids`, `pool` and `members`): the consumers of a shared
-- or serial durable whose lease lapsed are detached, and their events go back first in line
-- with one delivery more; delayed rollbacks that are due join the line too.
-- `d` as in members.lua, with also d.redo (list: ids waiting to be dealt again, first
-- first), d.delayed (zset: id -> when due, server ms), d.counts (hash: id -> redeliveries)
-- and d.taps (hash: tap key -> consumer id; a detached consumer's taps close); d.tally
-- (hash: the durable's counters, 'redelivered' counts the events handed back here).
local function reap(d, now)
  for _, consumer in ipairs(redis.call('ZRANGEBYSCORE', d.alive, '-inf', now)) do
    local back = sort_ids(claim(d.stream, d.group, POOL, pending_of(d.stream, d.group, consumer)))
    for _, id in ipairs(back) do
      redis.call('HINCRBY', d.counts, id, 1)
    end
    if #back > 0 then
      redis.call('HINCRBY', d.tally, 'redelivered', #back)
      d.counted = true
    end
    push_front(d.redo, back)
    remove_member(d, consumer)
    close_taps(d, listed_taps(d), consumer)  -- paused past its lease: it reads no more
  end
  -- How many rollbacks wait delayed (usually none: then not looked at for due ones), kept
  -- for the rest of the run in d.delayed_n (lib/deal.lua, undivided): nothing else in a
  -- dispatcher's run delays an event.
  d.delayed_n = redis.call('ZCARD', d.delayed)
  if d.delayed_n == 0 then
    return
  end
  local due = redis.call('ZRANGEBYSCORE', d.delayed, '-inf', now, 'LIMIT', 0, 1000)
  if #due > 0 then
    redis.call('ZREM', d.delayed, unpack(due))
    push_front(d.redo, sort_ids(due))
    d.delayed_n = d.delayed_n - #due
  end
end

-- Events pending for a consumer that is not a member (nor the pool) and has been idle
-- `ttl` ms or more: nobody can acknowledge them any more (an XACK lost in a failover,
-- a reader outside durables). They go back first in line, one delivery more, and the
-- consumer leaves the group. Returns how many events came back.
local function reap_orphans(d, ttl)
  local back = {}
  for _, info in ipairs(redis.call('XINFO', 'CONSUMERS', d.stream, d.group)) do
    local fields = {}
    for i = 1, #info, 2 do
      fields[info[i]] = info[i + 1]
    end
    local name = fields['name']
    if name ~= POOL and fields['idle'] >= ttl
        and redis.call('HEXISTS', d.members, name) == 0 then
      for _, id in ipairs(claim(d.stream, d.group, POOL, pending_of(d.stream, d.group, name))) do
        back[#back + 1] = id
        redis.call('HINCRBY', d.counts, id, 1)
      end
      redis.call('XGROUP', 'DELCONSUMER', d.stream, d.group, name)
    end
  end
  if #back > 0 then
    redis.call('HINCRBY', d.tally, 'redelivered', #back)
  end
  push_front(d.redo, sort_ids(back))
  return #back
end
