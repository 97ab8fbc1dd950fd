#!lua flags=allow-oom
-- A live session's heartbeat: renew the live client's lease and stamp the session's
-- record with the server's clock (expiry is judged on that clock by every client).
-- KEYS[1]  the session's live lease (string: the live client's token)
-- KEYS[2]  the session's record (hash)
-- ARGV[1]  the live client's token
-- ARGV[2]  lease length in milliseconds
-- Returns  1 if the lease was still this client's and is renewed, else 0 (nothing stamped).
-- Errors   none of its own.
-- A record that is gone stays gone: a client stopped past the keep-alive takes its lease
-- again before it finds its session expired, and a stamp would leave half a record.
--@include clock
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HSET', KEYS[2], 'last_seen_ms', string.format('%.0f', now_ms()))
end
return 1
