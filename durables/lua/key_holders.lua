#!lua
-- Who holds each key of a keyed durable now, for the operator's figures (read only).
-- KEYS[1]  the channel's stream
-- KEYS[2]  the durable's holds ('k:<key>' -> the id of its event out, lib/keyed.lua)
-- ARGV[1]  durable name (the group)
-- ARGV[2]  the most pending entries to look at
-- Returns  a flat list key, consumer, ... of the keys whose event is still pending (the
--          consumer is '_pool' while it waits to be dealt again); an acknowledged one's
--          key is free and left out.
local holder = {}
for _, entry in ipairs(redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', tonumber(ARGV[2]))) do
  holder[entry[1]] = entry[2]
end
local found = {}
local flat = redis.call('HGETALL', KEYS[2])
for i = 1, #flat, 2 do
  local consumer = string.sub(flat[i], 1, 2) == 'k:' and holder[flat[i + 1]]
  if consumer then
    found[#found + 1] = string.sub(flat[i], 3)
    found[#found + 1] = consumer
  end
end
return found
