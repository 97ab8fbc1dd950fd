#!lua flags=allow-oom
-- Place a session's replay marker on a channel: the id of the newest event now. Events up
-- to it (queued while the session was away) are replayed; events after it are live.
-- KEYS[1]  the channel's stream
-- ARGV     none
-- Returns  the marker id ('0-0' when the channel has never had an event).
-- Errors   none of its own.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return '0-0'
end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
for i = 1, #info, 2 do
  if info[i] == 'last-generated-id' then
    return info[i + 1]
  end
end
return '0-0'
