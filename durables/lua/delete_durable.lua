#!lua flags=allow-oom
-- Delete a durable: its consumer group, its spec and every key of its own.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's durables hash
-- KEYS[3..] the durable's own keys, all deleted (lease, gates and the gates they name,
--          redelivery counts, keep set, members, alive, ring, redo, delayed, bell, dead letters)
-- ARGV[1]  durable name
-- Returns  1 if it existed, else 0 (and nothing is deleted).
-- Errors   none of its own.
--@include members
--@include gates
if redis.call('HDEL', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.pcall('XGROUP', 'DESTROY', KEYS[1], ARGV[1])
drop_bells(KEYS[1], ARGV[1])
drop_gates_in(KEYS)
for i = 3, #KEYS do
  redis.call('DEL', KEYS[i])
end
return 1
