-- The fenced read of an exclusive durable's holder: it proves it still holds the lease
-- (and renews it), acknowledges cumulatively what the application committed since the
-- last read, then reads. One atomic step, so a holder paused past its lease (SIGSTOP, a
-- long pause) can read nothing once another holder took over: the lease check and the
-- read cannot be torn apart by a pause, as a pipelined pair can.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's lease
-- KEYS[3]  the durable's redelivery counts
-- KEYS[4]  the durable's keep set
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the holder's token (its consumer name)
-- ARGV[3]  lease length in milliseconds
-- ARGV[4]  the id up to which (inclusive) to acknowledge, or '' for none
-- ARGV[5]  how many entries to read at most
-- ARGV[6]  where to read: '>' for new entries, an id for the holder's own pending ones
-- Returns  {entries, top}: the entries read (as XREADGROUP gives them), and when none
--          came from '>', the id of the stream's newest entry ('0-0' if empty), from
--          which the holder waits for new ones without taking them (XREAD BLOCK).
-- Errors   LEASELOST; NOGROUP (Redis's own) if the durable's group is gone.
--@include cumulative
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
if redis.call('GET', KEYS[2]) ~= me then
  return redis.error_reply('LEASELOST the lease of this exclusive durable has lapsed')
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
if ARGV[4] ~= '' then
  ack_upto(stream, group, me, KEYS[3], KEYS[4], ARGV[4])
end
local read = redis.call('XREADGROUP', 'GROUP', group, me, 'COUNT', ARGV[5],
                        'STREAMS', stream, ARGV[6])
local entries = read and read[1][2] or {}
if #entries > 0 or ARGV[6] ~= '>' then
  return {entries, ''}
end
local newest = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
return {entries, newest[1] and newest[1][1] or '0-0'}
