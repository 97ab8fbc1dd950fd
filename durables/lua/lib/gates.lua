-- Library (`--@include gates`; drop_bells after `members`): the fence of exclusive durables. Each holder reads, beside
-- the channel's stream, an empty stream of its own (its gate) that has the durable's group;
-- a new holder deletes the others' gates, so a holder paused past its lease gets NOGROUP
-- (or, blocked, UNBLOCKED) instead of events. `gates` is the set of a durable's gate keys
-- (in the channel's slot).

-- Delete every gate in the set `gates` but `keep`, and the set's other members.
local function drop_gates(gates, keep)
  for _, gate in ipairs(redis.call('SMEMBERS', gates)) do
    if gate ~= keep then
      redis.call('DEL', gate)
      redis.call('SREM', gates, gate)
    end
  end
end

-- Before deleting a durable's keys: a gates set takes its gates with it, a taps hash
-- (lib/members.lua) its taps.
local function drop_gates_in(keys)
  for _, key in ipairs(keys) do
    if string.find(key, ':gates:', 1, true) then
      drop_gates(key, nil)
    elseif string.find(key, ':taps:', 1, true) then
      for _, tap in ipairs(redis.call('HKEYS', key)) do
        redis.call('DEL', tap)
      end
    end
  end
end

-- Before deleting a durable (named `durable`, on the channel whose stream is `stream`): the
-- bells of its members (members.lua, member_bell; they would lapse a minute later).
local function drop_bells(stream, durable)
  local d = {stream = stream, group = durable}
  local members = string.sub(stream, 1, #stream - 2) .. ':members:' .. durable
  for _, member in ipairs(redis.call('HKEYS', members)) do
    redis.call('DEL', member_bell(d, member))
  end
end
