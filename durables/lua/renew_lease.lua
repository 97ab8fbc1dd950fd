#!lua flags=allow-oom
-- Extend a consumer's lease if it still holds it.
-- KEYS[1]  the lease key
-- ARGV[1]  the holder's token
-- ARGV[2]  lease length in milliseconds
-- Returns  1 renewed, 0 the lease is gone or held by another token.
-- Errors   none of its own.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
