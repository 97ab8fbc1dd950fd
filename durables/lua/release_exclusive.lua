#!lua flags=allow-oom
-- Give up the lease of an exclusive durable on a clean close, recording the pending
-- events that were read but never handed to the application (their count must not rise).
-- The holder's gate goes in any case.
-- KEYS[1]  the durable's lease
-- KEYS[2]  the durable's keep set
-- KEYS[3]  the durable's gates set
-- KEYS[4]  the holder's gate
-- ARGV[1]  the holder's token
-- ARGV[2..] ids read but not handed out
-- Returns  1 if the lease was released, 0 if it was no longer held (nothing recorded).
-- Errors   none of its own.
redis.call('DEL', KEYS[4])
redis.call('SREM', KEYS[3], KEYS[4])
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if #ARGV > 1 then
  redis.call('SADD', KEYS[2], unpack(ARGV, 2))
end
redis.call('DEL', KEYS[1])
return 1
