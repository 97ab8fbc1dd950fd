#!lua flags=allow-oom
-- Set fields of a record hash (a session's record): a plain HSET, but one that goes through
-- at the server's maxmemory, where a resuming session must still be able to drain its queue.
-- KEYS[1]  the hash
-- ARGV     field, value, field, value, ...
-- Returns  how many fields were new
return redis.call('HSET', KEYS[1], unpack(ARGV))
