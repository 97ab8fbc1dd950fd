-- Housekeeping for ack-required events: every session's pending event whose ack timeout
-- has passed (its id's time plus its 'a' field, on the server's clock) is taken off the
-- session's queue and recorded as a nack with reason 'timeout'.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's nack stream
-- KEYS[3]  the channel's meta hash ('ackreq' says the channel has had such events)
-- Returns  how many nacks were recorded.
-- Errors   none of its own.
--@include clock
if redis.call('HGET', KEYS[3], 'ackreq') ~= '1' or redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local now, recorded = now_ms(), 0
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local info = {}
  for i = 1, #g, 2 do
    info[g[i]] = g[i + 1]
  end
  local group = info['name']
  if string.sub(group, 1, 9) == '~session:' and info['pending'] > 0 then
    for _, p in ipairs(redis.call('XPENDING', KEYS[1], group, '-', '+', 1000)) do
      local id = p[1]
      local entry = redis.call('XRANGE', KEYS[1], id, id)[1]
      local timeout = nil
      if entry then
        local fields = entry[2]
        for i = 1, #fields, 2 do
          if fields[i] == 'a' then
            timeout = tonumber(fields[i + 1])
          end
        end
      end
      local sent_ms = tonumber(string.match(id, '^(%d+)-'))
      if timeout and now > sent_ms + timeout then
        redis.call('XACK', KEYS[1], group, id)
        redis.call('XADD', KEYS[2], 'MAXLEN', '~', 10000, '*',
          'event', id, 'session', string.sub(group, 10), 'reason', 'timeout')
        recorded = recorded + 1
      end
    end
  end
end
return recorded
