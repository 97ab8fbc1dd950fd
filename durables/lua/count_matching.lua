#!lua flags=allow-oom
-- Count (or list) the events after an id that match a durable's filter, a bounded slice
-- at a time so a long stream never blocks the server for long.
-- KEYS[1]  the channel's stream
-- ARGV[1]  the filter's syntax tree as JSON (durables.selector.Selector.to_json)
-- ARGV[2]  count events after this id (exclusive)
-- ARGV[3]  scan at most this many events
-- ARGV[4]  'count', or 'ids' to return the matching ids themselves
-- ARGV[5]  (optional) count events up to this id (inclusive); '+' when absent
-- Returns  {count or list of ids, last id scanned ('' when the stream's end was reached)}.
-- Errors   none of its own.
--@include selector
local tree = cjson.decode(ARGV[1])
local limit = tonumber(ARGV[3])
local entries = redis.call('XRANGE', KEYS[1], '(' .. ARGV[2], ARGV[5] or '+', 'COUNT', limit)
local count, ids = 0, {}
for _, entry in ipairs(entries) do
  if selector.matches(tree, selector.fields(entry[2])) then
    count = count + 1
    ids[#ids + 1] = entry[1]
  end
end
local last = ''
if #entries == limit then
  last = entries[#entries][1]
end
if ARGV[4] == 'ids' then
  return {ids, last}
end
return {count, last}
