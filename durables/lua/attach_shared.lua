#!lua flags=allow-oom
-- Attach a consumer to a shared or serial durable: it joins the round-robin ring last.
-- A consumer with a filter makes it the durable's store filter from now on (Universal Messaging's shared durables):
-- only events it matches are kept for the durable; earlier consumers keep their own.
-- KEYS[1]  the channel's durables hash
-- KEYS[2]  the durable's members hash (consumer id -> {"w": window, "ast": filter tree};
--          field '_store' -> {"ast": store filter, "by": consumer id, "version": n})
-- KEYS[3]  the durable's alive zset (consumer id -> lease expiry, server ms)
-- KEYS[4]  the durable's ring list
-- KEYS[5]  the durable's taps hash: open taps close (a member that read new events alone
--          must share them in turn from now on)
-- ARGV[1]  durable name
-- ARGV[2]  consumer id
-- ARGV[3]  window: most unacknowledged events this consumer may hold
-- ARGV[4]  lease length in milliseconds
-- ARGV[5]  the consumer's filter tree as JSON, or '' for none
-- ARGV[6]  a token naming this attachment (hex): acknowledgements sent on their own carry
--          the token of the attachment they were made under (ack_shared.lua)
-- ARGV[7]  the hash of the consumer id (durables/key_hash.py), kept for a keyed durable's
--          dealing (lib/keyed.lua); absent from an older client: the dealing computes it
-- Returns  {the store filter's version as this consumer sees it (0: none yet), 1 if it was
--          a member already (attaching again after an outage within its lease), else 0:
--          new, or detached meanwhile for a lapsed lease, so what it held was dealt again
--          and is no longer its to acknowledge}.
-- Errors   NODURABLE.
--@include clock
--@include pool
--@include members
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return redis.error_reply('NODURABLE the durable does not exist')
end
local d = {members = KEYS[2], alive = KEYS[3], ring = KEYS[4]}
local tree = cjson.null
if ARGV[5] ~= '' then
  tree = cjson.decode(ARGV[5])
end
local member = redis.call('HEXISTS', d.members, ARGV[2])
-- The taps (keys not in KEYS) first: while a cluster moves the slot, one already moved
-- stops the script there, before it wrote anything but deletions of taps (harmless again).
wake_taps(KEYS[5])
add_member(d, ARGV[2], tonumber(ARGV[3]), tree, ARGV[4], ARGV[6], tonumber(ARGV[7]))
local version = store_filter(d)['version']
if ARGV[5] ~= '' then
  version = version + 1
  set_store_filter(d, tree, ARGV[2], version)
end
return {version, member}
