-- Library (`--@include watch`, after `members`): how idle members of a keyed durable
-- wait, so that a published event wakes one of them and not all.
--
-- One idle member at a time watches: it waits for the channel and the durable's bell
-- (acknowledgements, rollbacks and leaves ring it). The others wait for their own bell
-- alone (member_bell: a stream of one entry, deleted when the member leaves, and lapsing
-- by itself). The watcher's fetch deals what came, by key, and rings the bells of the
-- waiting members it dealt to, and only theirs; each reads its pending list right behind
-- its wait (the consumer's side), so it has the events without a fetch of its own. A
-- watcher that stops waiting (it got events, or asks without blocking) hands the watch
-- on: it rings one other waiting member, whose fetch takes it over. A watcher that died
-- watching loses the watch when its term ends (its wait's block time and a grace); the
-- others' waits end by then too, and the first to fetch watches.
--
-- d.waits (hash), for a keyed durable: member -> KEYED_WAIT while it waits at its bell;
-- WATCH -> '<member> <end of its term, server ms>'.
local KEYED_WAIT = 'k'
local WATCH = '~watch'
local BELL_TTL_MS = 60000

-- Ring the bell of `consumer` (members.lua, member_bell).
local function chime(d, consumer)
  local bell = member_bell(d, consumer)
  redis.call('XADD', bell, 'MAXLEN', 1, '*', 'r', 1)
  redis.call('PEXPIRE', bell, BELL_TTL_MS)
end

-- Who waits, before a keyed durable's dealing (which drops the marks of those it deals
-- to): the watcher whose term has not ended (or nil), and the other waiting members. The
-- caller fetches: its own wait, if any, is over (its mark goes).
local function keyed_waiters(d, me, now)
  local marks = redis.call('HGETALL', d.waits)
  local watcher, waiting = nil, {}
  for i = 1, #marks, 2 do
    local member, mark = marks[i], marks[i + 1]
    if member == WATCH then
      local who, till = string.match(mark, '^(.*) (%d+)$')
      if who and tonumber(till) > now then
        watcher = who
      end
    elseif member == me then
      redis.call('HDEL', d.waits, me)
    else
      waiting[#waiting + 1] = member
    end
  end
  return watcher, waiting
end

-- After a keyed durable's dealing: wake the `waiting` members dealt to (`dealt`: consumer
-- -> ids), and decide how the caller waits if it `wants` to (idle, blocking, with room).
-- Returns true if it watches, false if it waits for its bell alone, nil if it does not wait.
local function keyed_wait(d, me, watcher, waiting, dealt, wants, now, term_ms)
  local woken = {}
  for _, member in ipairs(waiting) do
    if dealt[member] then
      chime(d, member)
      woken[#woken + 1] = member
    end
  end
  if #woken > 0 then
    redis.call('HDEL', d.waits, unpack(woken))
  end
  if wants then
    redis.call('HSET', d.waits, me, KEYED_WAIT)
    if watcher == nil or watcher == me then
      redis.call('HSET', d.waits, WATCH, me .. ' ' .. string.format('%.0f', now + term_ms))
      return true
    end
    return false
  end
  if watcher == me then  -- it stops watching: another waiting member takes the watch over
    redis.call('HDEL', d.waits, WATCH)
    for _, member in ipairs(waiting) do
      if not dealt[member] then
        chime(d, member)
        redis.call('HDEL', d.waits, member)
        break
      end
    end
  end
  return nil
end
