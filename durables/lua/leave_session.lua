#!lua flags=allow-oom
-- A session leaves a channel: its group is destroyed (its queue there is gone), and its
-- queue limits and trip point go with it: the limits hold the group's position as the
-- last look left it (lib/queue_limits.lua), which a group made again would not have.
-- KEYS[1]  the channel's stream
-- KEYS[2]  the channel's session trip points
-- KEYS[3]  the channel's session queue limits
-- KEYS[4]  the channel's unsent zset (see nack_expired.lua): the session's notes go
-- ARGV[1]  session id
-- Returns  1 if the session had a group on the channel, else 0.
-- Errors   none of its own.
local left = redis.call('XGROUP', 'DESTROY', KEYS[1], '~session:' .. ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('ZREMRANGEBYLEX', KEYS[4], '[' .. ARGV[1] .. ' ', '(' .. ARGV[1] .. '!')
return left
