-- Library (`--@include clock`): the server's clock. No globals needed.
-- Every script reads time from here: leases, lifespans and expiry share one clock.

-- Now, in milliseconds, from the server's TIME.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
