#!lua flags=allow-oom
-- Record that a session did not acknowledge an ack-required event, and take the event off
-- the session's queue (it is not sent again).
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's nack stream
-- KEYS[3]  the channel's unsent zset (see nack_expired.lua)
-- ARGV[1]  the session's group ('~session:<id>')
-- ARGV[2]  the event id
-- ARGV[3]  the reason: 'timeout' or 'expired_before_sent' (the session's own finding), or
--          'unsent' (housekeeping records an event it noted as unsent: reason
--          'expired_before_sent')
-- Returns  1 if recorded, 0 if the session had acknowledged it meanwhile, or housekeeping
--          had recorded it before the session read it.
-- Errors   none of its own.
local sid = string.sub(ARGV[1], 10)
local reason = ARGV[3]
if reason == 'unsent' then
  reason = 'expired_before_sent'
else
  local acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  if acked == 0 and reason == 'timeout' then
    return 0
  end
  if reason == 'expired_before_sent' and redis.call('ZREM', KEYS[3], sid .. ' ' .. ARGV[2]) == 1 then
    return 0
  end
end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', 10000, '*',
  'event', ARGV[2], 'session', sid, 'reason', reason)
return 1
