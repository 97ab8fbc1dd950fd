#!lua flags=allow-oom
-- Delete a channel and everything in it, if its durables are exactly the ones named.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's meta hash
-- KEYS[3]  the channel's durables hash
-- KEYS[4..] the channel's other keys (last values and ids, nacks, session limits, producer
--          message ids, Spark sink records), and the own keys of every
--          durable named in ARGV: all deleted
-- ARGV[1..] the channel's durable names, as the caller listed them
-- Returns  1 deleted, 0 no such channel, -1 the durables changed meanwhile (list again and retry).
-- Errors   none of its own.
--@include members
--@include gates
if redis.call('EXISTS', KEYS[2]) == 0 then
  return 0
end
if redis.call('HLEN', KEYS[3]) ~= #ARGV then
  return -1
end
for _, name in ipairs(ARGV) do
  if redis.call('HEXISTS', KEYS[3], name) == 0 then
    return -1
  end
end
for _, name in ipairs(ARGV) do
  drop_bells(KEYS[1], name)
end
drop_gates_in(KEYS)
for _, key in ipairs(KEYS) do
  redis.call('DEL', key)
end
return 1
