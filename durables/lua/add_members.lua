#!lua flags=allow-oom
-- Add members to a set (the session registry, an exclusive durable's keep set): a plain
-- SADD, but one that goes through at the server's maxmemory, where consumers and sessions
-- must still drain what is stored.
-- KEYS[1]  the set
-- ARGV     the members
-- Returns  how many were new
return redis.call('SADD', KEYS[1], unpack(ARGV))
