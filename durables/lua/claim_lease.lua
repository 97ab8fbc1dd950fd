#!lua flags=allow-oom
-- Take a lease if it is free, or keep it if this holder has it already (a client coming
-- back after an outage shorter than its lease still holds it).
-- KEYS[1]  the lease key
-- ARGV[1]  the holder's token
-- ARGV[2]  lease length in milliseconds
-- Returns  0 if the lease is now this holder's; else the milliseconds the other
--          holder's lease has left (at least 1).
-- Errors   none of its own.
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return math.max(redis.call('PTTL', KEYS[1]), 1)
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 0
