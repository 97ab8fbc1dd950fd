-- Library (`--@include key_hash`): the hash of an event's key, or of a consumer's id, as
-- durables/key_hash.py computes it: plain arithmetic modulo a prime below 2^26 (Redis's Lua
-- numbers are doubles, and fakeredis's Lua has no bit operations).
-- A C function call costs the server about 800 instructions here, arithmetic about 200 per
-- step: the bytes are read 64 at a time, and a consumer's hash is computed once, when it
-- attaches (members.lua keeps it).
local KEY_PRIME = 67108859  -- below 2^26: squares stay exact in a double

local function key_mixed(value)
  for _ = 1, 2 do
    value = (value * 48271 + 11) % KEY_PRIME
    value = (value * value + 7) % KEY_PRIME
  end
  return value
end

-- The hash of a key (its bytes), as durables.key_hash.key_hash.
local function key_hash(key)
  local value = 0
  for from = 1, #key, 64 do
    local bytes = {string.byte(key, from, from + 63)}
    for i = 1, #bytes do
      value = (value * 257 + bytes[i] + 1) % KEY_PRIME
    end
  end
  return key_mixed(value)
end
