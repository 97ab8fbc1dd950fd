#!lua flags=allow-oom
-- Extend an attached consumer's lease if it is still a member (not reaped as dead).
-- KEYS[1]  the durable's members hash
-- KEYS[2]  the durable's alive zset
-- ARGV[1]  consumer id
-- ARGV[2]  lease length in milliseconds
-- Returns  1 renewed, 0 the consumer is no longer attached.
-- Errors   none of its own.
--@include clock
--@include pool
--@include members
if renew_member({members = KEYS[1], alive = KEYS[2]}, ARGV[1], ARGV[2]) then
  return 1
end
return 0
