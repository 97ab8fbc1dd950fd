-- Library (`--@include clock`): the server's clock. No globals needed.
-- (trim.lua is the exception: it takes the time as an argument.)

-- Now, in milliseconds, from the server's TIME.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
