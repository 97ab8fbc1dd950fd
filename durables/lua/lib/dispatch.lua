-- Library (`--@include dispatch`, after `clock`, `pool`, `members` and `reap`): the start that every
-- dealing fetch shares (fetch_shared.lua, fetch_serial.lua, fetch_keyed.lua: one script per
-- kind, so that each run defines only the functions its kind calls). KEYS and ARGV as
-- fetch_shared.lua describes them.
local TAP_GRACE_MS = 1000

-- The durable's keys and group, as the libraries name them.
local function fetch_keys()
  return {
    stream = KEYS[1], members = KEYS[3], alive = KEYS[4], ring = KEYS[5], redo = KEYS[6],
    delayed = KEYS[7], counts = KEYS[8], bell = KEYS[9], dead = KEYS[10], taps = KEYS[11],
    waits = KEYS[13], tally = KEYS[15], holds = KEYS[16], group = ARGV[1],
  }
end

-- Renew the caller's lease, make its acknowledgements and reap the members whose lease
-- lapsed (their events, and due rollbacks, go back first in line): the durable's spec and
-- the server's time, or nil and the error to return (the caller was detached; the durable
-- is gone, or it was deleted and made again as another kind than `kind`: the durable the
-- caller attached to is gone).
-- The acknowledgements go behind the lease check: XACK does not check the owner, so a
-- plain XACK from a consumer detached meanwhile would take an event dealt again to another
-- member out of the dispatcher's sight while that member still holds it (a serial durable
-- deals on, a window overfills). Passed here, the ids cost the server about 1,750
-- instructions per event of a batch of 100, against a plain XACK before the script
-- (measured, and left so).
local function fetch_begin(d, kind)
  local now = now_ms()
  if not renew_member(d, ARGV[2], ARGV[3], now) then
    return nil, redis.error_reply('DETACHED this consumer lost its lease and was detached')
  end
  -- Whether redelivery counts exist (usually not): false holds for the rest of the run
  -- unless reap counts one (it sets d.counted), so redelivered_of need not look again.
  d.counted = redis.call('EXISTS', d.counts) == 1
  if #ARGV >= 7 then
    redis.call('XACK', d.stream, d.group, unpack(ARGV, 7))
    if d.counted then  -- passing the ids again costs ~0.2 µs each
      redis.call('HDEL', d.counts, unpack(ARGV, 7))
    end
  end
  local raw_spec = redis.call('HGET', KEYS[2], d.group)
  if not raw_spec then
    return nil, redis.error_reply('NODURABLE the durable does not exist')
  end
  local spec = cjson.decode(raw_spec)
  if spec['kind'] ~= kind then
    return nil, redis.error_reply('NODURABLE the durable was deleted and made again as a '
      .. tostring(spec['kind']) .. ' durable')
  end
  reap(d, now)
  return spec, now
end
