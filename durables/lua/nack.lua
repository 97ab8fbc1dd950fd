-- Record that a session did not acknowledge an ack-required event, and take the event off
-- the session's queue (it is not sent again).
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's nack stream
-- ARGV[1]  the session's group ('~session:<id>')
-- ARGV[2]  the event id
-- ARGV[3]  the reason: 'timeout' or 'expired_before_sent'
-- Returns  1 if recorded, 0 if the session had acknowledged it meanwhile.
-- Errors   none of its own.
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 and ARGV[3] == 'timeout' then
  return 0
end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', 10000, '*',
  'event', ARGV[2], 'session', string.sub(ARGV[1], 10), 'reason', ARGV[3])
return 1
