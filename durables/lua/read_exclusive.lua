-- Read the next events of an exclusive durable for its lease holder, renewing the
-- lease. Fenced: a holder whose lease lapsed (and maybe passed on) reads nothing.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's lease
-- ARGV[1]  durable name (the consumer group)
-- ARGV[2]  the holder's token
-- ARGV[3]  lease length in milliseconds
-- ARGV[4]  how many events at most
-- ARGV[5]  '>' for new events, or an id: re-read the durable's pending events after it
-- Returns  {1, entries}, or {0, id of the newest entry or '0-0'} when nothing is new
--          (the caller blocks on XREAD after that id).
-- Errors   LEASELOST.
if redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return redis.error_reply('LEASELOST the lease of this exclusive durable has lapsed')
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
local got = redis.call('XREADGROUP', 'GROUP', ARGV[1], 'exclusive', 'COUNT', ARGV[4],
  'STREAMS', KEYS[1], ARGV[5])
if got and #got[1][2] > 0 then
  return {1, got[1][2]}
end
if ARGV[5] ~= '>' then
  return {1, {}}
end
local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #newest == 0 then
  return {0, '0-0'}
end
return {0, newest[1][1]}
