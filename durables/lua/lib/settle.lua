-- Library (`--@include settle`, after `ids`, `pool`, `members` and `deal`): idle members
-- of a shared durable that wait in reads of their own, so that a published event wakes
-- one member, in the reply to the read it is blocked in, and not every member.
--
-- An idle member (room in its window, no filter anywhere, nothing handed back or
-- delayed) gets a door from the dispatcher: a stream with the durable's group, like a
-- tap. Its wait is one pipeline (join_shared.lua, a read of its door, a read of the
-- channel through its tap, settle_shared.lua, a read of its pending list): it joins the
-- waiters and blocks reading its door. WATCHERS of the waiting members at a time, the
-- first in the ring's order, are woken to watch: their tap is opened and an entry is
-- added to their door, so their read of the door returns and the next command of their
-- pipeline, the read of the channel through the tap, blocks there. The server hands a
-- new event to the watcher blocked longest; watchers are woken in the ring's order, the
-- next one as the one before takes an event, so that one is the head of the ring, and
-- the hand-over needs no round trip: the next watcher's read was sent already. The
-- script right behind the read settles what it took and wakes the next watcher. Without
-- an open tap the read of the channel fails at once: only watchers take.
--
-- d.waits (hash) marks the waiting members: DOORBELL, or for a watcher the newest id any
-- member held when it was woken (read_mark): what it holds past that id, it took itself.
-- Settling turns the ring past each taker in id order, exactly as dealing would have; an
-- event whose taker was not the member dealing would choose goes to that member instead
-- (its taps close, which wakes it; one that does not watch has its door rung instead,
-- `give`), so the round robin holds exactly. Anything that gives a member events any
-- other way closes its taps, and its mark with them (members.lua, close_taps); anything
-- that changes the dealing closes every tap and door.
local DOORBELL = 'd'
-- The mark of a member dealt events by another's take while it did not watch (it waited at
-- its door, or was busy): its door is rung instead of closed, so its wait, this one or its
-- next, ends at once and brings them from its pending list, and it keeps its door: no
-- round through the dispatcher before it waits again.
local GIVEN = 'g'
-- One watcher at a time: the order in which the server served two blocked reads drifts
-- from the ring's.
local WATCHERS = 1

-- The key of `consumer`'s own tap (or door), from the caller's (`key`, of `me`): same slot.
local function key_of(key, me, consumer)
  return string.sub(key, 1, #key - #me) .. consumer
end

-- Hand `consumer` events it was just dealt outside its own read: while it does not watch
-- (its door is its only open tap) its door is rung and marked GIVEN (join_shared.lua lets
-- its next wait through at once); else its taps close, which wakes it. `door`, `me`: the
-- caller's door and id (the consumer's is found from them). True if taps were closed.
local function give(d, taps, consumer, door, me)
  local own = key_of(door, me, consumer)
  local open = taps[consumer]
  if consumer ~= me and open and #open == 1 and open[1] == own
      and redis.call('XADD', own, 'NOMKSTREAM', 'MAXLEN', 1, '*', 'w', 1) then
    redis.call('HSET', d.waits, consumer, GIVEN)
    return false
  end
  close_taps(d, taps, consumer)
  return true
end

-- Settle the events watchers took. `order`, `room`, `filters`: as rooms(d) returned
-- them; `taps`: listed_taps(d); `door`, `me`: the caller's door and id. A mark stays while
-- its member still waits (nothing taken, a tap listed, still a member; one whose taps
-- expired is unmarked by wake_watchers, which looks); true if anything was
-- settled (the ring or holdings changed), and then whether any member had a mark (none:
-- nobody waits, nor can till this script ends).
local function settle(d, order, room, filters, taps, door, me)
  local marks = redis.call('HGETALL', d.waits)
  if #marks == 0 then
    return false, false
  end
  local took, in_ring = {}, {}
  for _, consumer in ipairs(order) do
    in_ring[consumer] = true
  end
  for i = 1, #marks, 2 do
    local member, since = marks[i], marks[i + 1]
    local got = {}
    if since ~= DOORBELL and since ~= GIVEN then
      got = redis.call('XPENDING', d.stream, d.group, '(' .. since, '+', 10, member)
    end
    for _, entry in ipairs(got) do
      took[#took + 1] = {entry[1], member}
      if room[member] then
        room[member] = room[member] + 1  -- as before it took: dealing decides again
      end
    end
    if #got > 0 or not in_ring[member] or taps[member] == nil then
      redis.call('HDEL', d.waits, member)  -- its wait is over
    end
  end
  if #took == 0 then
    return false, true
  end
  table.sort(took, function(a, b) return id_before(a[1], b[1]) end)
  local at, woke, back = 1, false, {}
  for _, pair in ipairs(took) do
    local id, member = pair[1], pair[2]
    local i = #order > 0 and taker(d.stream, order, room, filters, at, id) or nil
    if i == nil then  -- nobody may take it now: first in line for the next dealing
      claim(d.stream, d.group, POOL, {id})
      back[#back + 1] = id
    else
      local consumer = order[i]
      if consumer ~= member then
        claim(d.stream, d.group, consumer, {id})
        woke = give(d, taps, consumer, door, me) or woke
      end
      room[consumer] = room[consumer] - 1
      at = i % #order + 1
    end
  end
  if #back > 0 then
    redis.call('RPUSH', d.redo, unpack(back))
  end
  turn_ring(d, order, at)
  if woke then
    ring_bell(d.bell)  -- a member waiting for the bell, not in a read of its own
  end
  return true, true
end

-- A watcher's mark: the newest event any member of the durable holds ('0-0' for none),
-- from XPENDING's summary. Everything a member holds when it is woken is at or below it,
-- and everything it takes as a watcher is above it (new events, past the durable's read
-- position, which no held event passes), so an event published while nobody watched,
-- taken by the next watcher, counts as taken. XINFO GROUPS would give the read position
-- itself, but it answers for every group of the channel, about 11,000 instructions each,
-- and a channel has a group for each durable and each session interested in it.
local function read_mark(d)
  return redis.call('XPENDING', d.stream, d.group)[3] or '0-0'
end

-- Open `consumer`'s tap `key` for `ttl_ms`; `spare`: the caller's own tap, open and being
-- closed, or nil. A spare is renamed into the new tap (its stream and group kept), which
-- saves the server creating one tap and deleting another at every hand-over. True if the
-- spare was used.
local function open_tap(d, key, consumer, ttl_ms, spare)
  if spare then
    local moved = redis.pcall('RENAME', spare, key)
    if type(moved) ~= 'table' or not moved.err then
      redis.call('PEXPIRE', key, ttl_ms)
      redis.call('HDEL', d.taps, spare)
      redis.call('HSET', d.taps, key, consumer)
      return true
    end
  end
  set_tap(d, key, consumer, true, ttl_ms)
  return false
end

-- Wake waiting members to watch, the first in the ring's order, until WATCHERS watch:
-- open their tap and ring their door. `tap`, `door`, `me`: the caller's tap, door and id
-- (the others' keys are found from them); `read`: their mark if the caller has it from
-- read_mark(d) already, else nil; `spare`: as open_tap's; `marks`: the waits hash as
-- HGETALL gives it, if the caller has it already, else nil. True if the spare was used.
local function wake_watchers(d, tap, door, me, ttl_ms, read, spare, marks)
  marks = marks or redis.call('HGETALL', d.waits)
  local waiting, watching = {}, 0
  for i = 1, #marks, 2 do
    if marks[i + 1] == DOORBELL then
      waiting[marks[i]] = true
    elseif marks[i + 1] == GIVEN then  -- its wait ends at once: it reads what it was given
    elseif redis.call('EXISTS', key_of(tap, me, marks[i])) == 1 then
      watching = watching + 1
    else  -- its tap is gone: it stopped reading (a reaped or killed member), or was dealt
      redis.call('HDEL', d.waits, marks[i])
    end
  end
  if watching >= WATCHERS or next(waiting) == nil then
    return false
  end
  local since = read or read_mark(d)
  local used = false
  for _, consumer in ipairs(redis.call('LRANGE', d.ring, 0, -1)) do
    if waiting[consumer] then
      -- its door rung (its read returns once this script ends), unless it is closed
      local rung = redis.call('XADD', key_of(door, me, consumer), 'NOMKSTREAM', 'MAXLEN', 1,
        '*', 'w', 1)
      if not rung then  -- closed: it fetches through the dispatcher
        redis.call('HDEL', d.waits, consumer)
      else
        used = open_tap(d, key_of(tap, me, consumer), consumer, ttl_ms, not used and spare) or used
        redis.call('HSET', d.waits, consumer, since)
        watching = watching + 1
        if watching >= WATCHERS then
          return used
        end
      end
    end
  end
  return used
end

-- wake_watchers, and then the caller's `spare` tap (or nil) closed if no watcher took it.
local function watch(d, tap, door, me, ttl_ms, read, spare, marks)
  if not wake_watchers(d, tap, door, me, ttl_ms, read, spare, marks) and spare then
    set_tap(d, spare, me, false, 0)
  end
end
