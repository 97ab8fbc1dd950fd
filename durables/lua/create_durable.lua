#!lua flags=allow-oom
-- Create a durable (its consumer group and stored spec) unless it exists.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's meta hash
-- KEYS[3]  the channel's durables hash (name -> spec JSON)
-- ARGV[1]  durable name
-- ARGV[2]  spec JSON to store if the durable is new
-- ARGV[3]  the group's start: '0', '$', or the id just before the first event to deliver
-- ARGV[4]  an event id that must exist in the stream ('' = no check)
-- Returns  {1, spec} when created, {0, stored spec} when it already existed.
-- Errors   NOCHANNEL, NOSTART <id>; XGROUP CREATE's own errors (a bad start id, ...) are
--          passed on, except BUSYGROUP (the group exists: it is kept).
if redis.call('EXISTS', KEYS[2]) == 0 then
  return redis.error_reply('NOCHANNEL the channel does not exist')
end
local stored = redis.call('HGET', KEYS[3], ARGV[1])
if stored then
  return {0, stored}
end
if ARGV[4] ~= '' and #redis.call('XRANGE', KEYS[1], ARGV[4], ARGV[4]) == 0 then
  return redis.error_reply('NOSTART ' .. ARGV[4])
end
local made = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], ARGV[3], 'MKSTREAM')
if type(made) == 'table' and made.err and string.sub(made.err, 1, 9) ~= 'BUSYGROUP' then
  return made
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
return {1, ARGV[2]}
