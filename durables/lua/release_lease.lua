#!lua flags=allow-oom
-- Give up a lease if this holder still has it.
-- KEYS[1]  the lease key
-- ARGV[1]  the holder's token
-- Returns  1 released, 0 it was gone or held by another token.
-- Errors   none of its own.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
