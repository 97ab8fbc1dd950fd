#!lua flags=allow-oom
-- Take the lease of an exclusive durable. Each holder reads as a consumer of its own
-- (its token), so the events earlier holders read and did not acknowledge are moved to
-- the new holder, which reads them first; each counts one more delivery, except those
-- rolled back or never handed out (the keep set).
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's durables hash
-- KEYS[3]  the durable's lease
-- KEYS[4]  the durable's redelivery counts (hash id -> count)
-- KEYS[5]  the durable's keep set (ids whose count must not rise)
-- KEYS[6]  the durable's gates set
-- KEYS[7]  the new holder's gate (an empty stream given the durable's group)
-- KEYS[8]  the durable's tally (counters for the metrics: 'redelivered')
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the new holder's token (its consumer name in the group)
-- ARGV[3]  lease length in milliseconds
-- ARGV[4]  the token of a holder known to be dead (its process is gone), whose lease may
--          be taken before it lapses; '' for none
-- Returns  the redelivery counts as a flat list: id, count, id, count...
-- Errors   NODURABLE, INUSE <lease ms left> <holder token>; NOGROUP (Redis's own) if the durable's spec
--          is there but its group is gone.
--@include pool
--@include gates
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
if redis.call('HEXISTS', KEYS[2], group) == 0 then
  return redis.error_reply('NODURABLE the durable does not exist')
end
local holder = redis.call('GET', KEYS[3])
if holder and holder ~= me and holder ~= ARGV[4] then
  return redis.error_reply('INUSE ' .. math.max(redis.call('PTTL', KEYS[3]), 0) .. ' ' .. holder)
end
redis.call('SET', KEYS[3], me, 'PX', ARGV[3])
drop_gates(KEYS[6], KEYS[7])  -- earlier holders can read nothing more
redis.call('SADD', KEYS[6], KEYS[7])
if redis.call('EXISTS', KEYS[7]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[7], group, '$', 'MKSTREAM')
end
local again = 0  -- events handed out again: counted for the metrics
for _, consumer in ipairs(redis.call('XINFO', 'CONSUMERS', stream, group)) do
  local name = consumer[2]
  if name ~= me then
    local ids = pending_of(stream, group, name)
    for _, id in ipairs(ids) do
      if redis.call('SISMEMBER', KEYS[5], id) == 0 then
        redis.call('HINCRBY', KEYS[4], id, 1)
        again = again + 1
      end
    end
    claim(stream, group, me, ids)
    redis.call('XGROUP', 'DELCONSUMER', stream, group, name)
  end
end
if again > 0 then
  redis.call('HINCRBY', KEYS[8], 'redelivered', again)
end
redis.call('DEL', KEYS[5])
return redis.call('HGETALL', KEYS[4])
