"""The shared / serial consumer's state machine, without I/O (layer 2, as `ops/`): what to
send next and what a reply means. Its reader (`reader.SharedReader`, beside it) sends.

Each fetch is one round trip: the dispatcher script (`fetch_shared.lua`, which also
carries the acks of the previous batch), a read of the caller's own pending events
(`XREADGROUP ... 0`), so payloads never pass through Lua, then reads of new events
straight from the channel through the caller's taps (lib/members.lua), which happen
only if the script opened one. A serial consumer's read blocks while nothing comes (a
waiting consumer gets a new event in the reply to the read it is blocked in), and its tap
stays open while it keeps asking (each read renews it), so its steady fetch is that read
and a small script that renews the tap and makes the acks only while it is open;
whatever changes the dealing closes the taps, and the next fetch asks the dispatcher
again. A shared consumer reads through its tap only right after the script, never
blocking, and only while busy: the script opens it when the consumer alone has room and
deals it the first new event itself. An idle shared consumer waits in one pipeline of its
own (`_wait`, lib/settle.lua): at its door until woken to watch, then reading the
channel, so an event wakes one consumer, not all. Events already handed out and not yet
acknowledged are remembered here, so re-reading the pending list hands each event out
once.

Acks never go as a plain `XACK`, which does not check who holds an event: a member
detached for a lapsed lease (a pause, an outage) has its events dealt again, and its late
`XACK` would take them out of the dispatcher's sight while their new holder works on them.
Each goes behind a check that the caller is still a member, or that its tap or door is
open (detaching closes them first); a consumer that joins again as a new member forgets
what it held.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Sequence
from functools import partial
from typing import Any, cast

from ... import keys
from ...events import Event, SeenMessages, event_from_entry
from ...key_hash import key_hash
from ...ops.base import Op, as_bool, as_int, command, script
from ...reply_parsers import entries_read, text
from ...selector import Selector
from . import handout_replies as parsed
from .handout_replies import Dealt

log = logging.getLogger(__name__)
TAP_CLOSED = frozenset({"NOGROUP", "UNBLOCKED"})
"""A read through a tap the script did not open (or closed while it blocked) fails so."""

READY = 2
"""An idle shared consumer may join the waiters (lib/settle.lua): its door is open."""

KEYED_WATCH = 3
"""An idle keyed consumer watches the channel for the others (lib/watch.lua)."""

TAP_GRACE_MS = 1000
"""A tap outlives the read's block by this much (as `fetch_shared.lua` opens it): a
consumer that stops asking lets it expire, and the line passes on."""

RECENT_ACKS = 10_000
"""How many acknowledged ids a consumer remembers to discard exact duplicates (bounded)."""


class SharedHandout:
    """One attached consumer of a shared or serial durable: what it was handed, what it
    owes an ack for."""

    def __init__(
        self,
        k: keys.ChannelKeys,
        durable: str,
        kind: str,
        consumer_id: str,
        *,
        window: int,
        lease_ms: int,
        selector: Selector | None = None,
    ) -> None:
        self.k, self.durable, self.id = k, durable, consumer_id
        self.window, self.lease_ms, self.selector = window, lease_ms, selector
        self.context = f"{kind} durable {durable!r} on {k.channel!r}"
        self.serial = kind == "serial"
        self.pooled = kind == "keyed"
        """Every event is dealt through the pool (keyed: by key): no tap, no door."""
        self._dispatcher = f"fetch_{kind}"  # the kind's dispatcher script (lua/fetch_shared.lua)
        d = durable
        self._fetch_keys = (
            k.stream, k.durables, k.members(d), k.alive(d), k.ring(d), k.redo(d),
            k.delayed(d), k.redeliveries(d), k.bell(d), k.dead(d), k.taps(d),
            k.tap(d, consumer_id), k.waits(d), k.door(d, consumer_id), k.tally(d), k.holds(d),
        )  # fmt: skip
        tap, door = self._fetch_keys[11], self._fetch_keys[13]
        # an idle consumer's wait sends these at every round (`_wait`): made once
        self._join_keys = (k.stream, k.ring(d), k.redo(d), k.taps(d), k.waits(d), tap, door,
                           k.redeliveries(d))  # fmt: skip
        self._settle_keys = (k.stream, k.members(d), k.alive(d), k.ring(d), k.redo(d),
                             k.delayed(d), k.redeliveries(d), k.bell(d), k.taps(d),
                             k.waits(d), tap, door, k.tally(d))  # fmt: skip
        self._ack_keys = (k.stream, k.members(d), k.redeliveries(d))  # and the bell (`flush`)
        self.handed: set[str] = set()  # handed to the application, not yet acked
        self.to_ack: list[str] = []  # deferred acks, sent with the next fetch
        self._acked: set[str] = set()  # acknowledged lately (`_remember`)
        self._acked_before: set[str] = set()
        self.discarded = 0
        """Exact duplicates not handed out again: events acknowledged here that came back
        (an acknowledgement lost in a failover, redis/redis#5433), or a publish stored
        twice (`SeenMessages`)."""
        self.seen = SeenMessages()
        self.store_version = 0
        self._in_flight: list[str] = []
        self._rolled_back: set[str] = set()
        """Events rolled back here and not dealt again since: until the rollback has run,
        they are still in this consumer's pending list, where a read racing it (another
        thread's fetch or wait) must not take them for new ones."""
        self._counted: set[str] = set()
        """Events dealt with a redelivery count, until acknowledged: only their counts need
        dropping with a plain acknowledgement (`_acks`)."""
        self._took = 0  # events the last read through a tap took
        self._busy = False  # the last fetch brought several events: a shared tap may pay
        self._block_ms = 0
        self.tap_open = False
        """The dispatcher opened this consumer's tap and no read found it closed since."""
        self.wait_open = 0
        """READY: this idle shared consumer may wait without the dispatcher, else 0."""
        self._watching = False  # it watches on past its last wait (settle_shared.lua)
        self._fast = False  # the fetch in flight is `_tap_fetch`
        self._stage = "deal"  # the fetch in flight: "deal", or "wait" (`_wait`)
        self._chime = "0-0"
        """Keyed: the newest id of this consumer's own bell when it last fetched."""
        self._token = ""
        """Names the latest attachment: acks sent on their own carry it (`flush`)."""

    def attach(self) -> Op[tuple[int, bool]]:
        """Join the ring with this window (and filter); the store filter's version comes back,
        and whether it was a member already."""
        k, d = self.k, self.durable
        tree = json.dumps(self.selector.to_json()) if self.selector else ""
        self._token = secrets.token_hex(4)
        hashed = key_hash(self.id)  # kept for a keyed durable's dealing (lib/key_hash.lua)
        return script("attach_shared", [k.durables, k.members(d), k.alive(d), k.ring(d), k.taps(d)],
                      [d, self.id, self.window, self.lease_ms, tree, self._token, hashed],
                      parse=parsed.attached, context=self.context)  # fmt: skip

    def on_attach(self, attached: tuple[int, bool]) -> None:
        self.store_version, member = attached
        self.tap_open, self.wait_open = False, 0  # attaching closes every tap
        if not member:
            self.forget()

    def forget(self) -> None:
        """Joined as a new member: anything this consumer held was dealt again when it was
        detached (a lease that lapsed in a pause or an outage), so its acknowledgements
        are no longer its to send: the events' new holders own them."""
        dropped = {*self.to_ack, *self._in_flight, *self.handed}
        self._acked.difference_update(dropped)  # if they come back here, they are new
        self._acked_before.difference_update(dropped)
        self.to_ack, self._in_flight = [], []
        self.handed.clear()
        self._counted.clear()
        self._rolled_back.clear()

    def renew(self) -> Op[bool]:
        return script("renew_member", [self.k.members(self.durable), self.k.alive(self.durable)],
                      [self.id, self.lease_ms], parse=as_bool, context=self.context)  # fmt: skip

    def fetch(self, seconds: float = 0.0) -> list[Op[Any]]:
        """The dispatcher (with the deferred acks), this consumer's pending events, then new
        events through its tap if the dispatcher opened one, blocking up to `seconds` if
        nothing comes (0: not at all). While the tap stays open and this consumer holds
        nothing, the fetch is the acks and the read through the tap alone (`_tap_fetch`)."""
        self._in_flight, self.to_ack = self.to_ack, []
        self._block_ms = max(1, int(seconds * 1000)) if seconds > 0 else 0
        self._fast = self.serial and self.tap_open and not self.handed
        if self._fast:
            return self._tap_fetch()
        d = self.durable
        room = self.window - len(self.handed)
        # shared: read through a tap only while busy (an idle consumer's fetch brings an
        # event or none, and a read that fails costs it more than it saves); idle and
        # blocking, wait through it (lib/settle.lua)
        shared = not self.serial and not self.pooled
        tapping = shared and self._busy and room >= 2
        # keyed: idle and blocking, it watches or waits for its own bell (lib/watch.lua)
        waiting = not self.serial and not tapping and self._block_ms > 0 and room >= 1
        took = self._took if self.serial else (1 if tapping else 2 if waiting else 0)
        self._stage = "deal"
        if waiting and self.wait_open and not self.pooled:
            return self._wait()
        deal: Op[Any] = script(self._dispatcher, self._fetch_keys,
                               [d, self.id, self.lease_ms, len(self.handed), took,
                                self._block_ms, *self._in_flight],
                               context=self.context)  # fmt: skip
        read = self._pending()
        if self.serial:
            return [deal, read, self._tap_read(max(1, room))]
        if not tapping:
            return [deal, read]
        # a shared durable's tap: the rest of the room, when the script dealt the caller
        # the first new event (deal_first); never blocking, as others may gain room
        return [deal, read, self._tap_read(room - 1, block=False)]

    def _tap_read(self, count: int, block: bool = True) -> Op[list[Any] | None]:
        """Up to `count` new events straight from the channel while the tap is open (None
        once it is not: the read then fails at once, or wakes when the tap is deleted)."""
        blocking = ("BLOCK", self._block_ms) if self._block_ms and block else ()
        return command("XREADGROUP", "GROUP", self.durable, self.id, "COUNT", count, *blocking,
                       "STREAMS", self.k.stream, self._fetch_keys[11], ">", ">",
                       parse=parsed.tapped, context=self.context, tolerate=TAP_CLOSED)  # fmt: skip

    def _tap_fetch(self) -> list[Op[Any]]:
        """The steady path of a serial consumer that keeps asking: no script. The tap is
        renewed (`PEXPIRE`: 0 if it is gone, closed by whatever changed the dealing or
        expired), then read; a closed tap fails the read, and the next fetch asks the
        dispatcher."""
        k, tap, ttl = self.k, self._fetch_keys[11], self._block_ms + TAP_GRACE_MS
        renew: Op[bool]
        if self._in_flight:
            renew = script("ack_tap", [k.stream, tap, k.redeliveries(self.durable)],
                           [self.durable, ttl, *self._acks(self._in_flight)], parse=as_bool,
                           context=self.context)  # fmt: skip
        else:
            renew = command("PEXPIRE", tap, ttl, parse=as_bool, context=self.context)
        return [renew, self._tap_read(max(1, self.window - len(self.handed)))]

    def _pending(self) -> Op[list[Any]]:
        """This consumer's pending events (those handed out already are skipped)."""
        return command("XREADGROUP", "GROUP", self.durable, self.id, "COUNT", self.window,
                       "STREAMS", self.k.stream, "0",
                       parse=entries_read, context=self.context)  # fmt: skip

    def _wait(self) -> list[Op[Any]]:
        """An idle shared consumer's wait, one pipeline (lib/settle.lua), its acks first:
        join the waiters, read its door until woken to watch, read the channel through its
        tap (which fails at once unless it was woken), settle what it took, and read its
        pending list, which brings what is this consumer's. Each read blocks for half the
        time, so the whole wait stays within it."""
        d, tap, door = self.durable, self._fetch_keys[11], self._fetch_keys[13]
        half = max(1, self._block_ms // 2)
        # a burst is taken whole, and the script behind deals it round robin
        room = max(1, self.window - len(self.handed))
        self._stage = "wait"
        return [script("join_shared", self._join_keys,
                       [d, self.id, self._block_ms, *self._acks(self._in_flight)],
                       parse=as_int, context=self.context),
                command("XREADGROUP", "GROUP", d, self.id, "COUNT", 1, "BLOCK", half,
                        "STREAMS", door, ">", parse=parsed.tapped, context=self.context,
                        tolerate=TAP_CLOSED),
                command("XREADGROUP", "GROUP", d, self.id, "COUNT", room, "BLOCK", half,
                        "STREAMS", self.k.stream, tap, ">", ">", parse=parsed.tapped,
                        context=self.context, tolerate=TAP_CLOSED),
                script("settle_shared", self._settle_keys, [d, self.id, self._block_ms],
                       parse=parsed.settled, context=self.context),
                self._pending()]  # fmt: skip

    def _leave(self) -> Op[int]:
        k, d = self.k, self.durable
        return script("leave_shared", [k.stream, k.ring(d), k.taps(d), k.waits(d),
                                       self._fetch_keys[11], self._fetch_keys[13]],
                      [d, self.id, self._block_ms, "keyed" if self.pooled else ""],
                      parse=as_int, context=self.context)  # fmt: skip

    def stop_waiting(self) -> Op[int] | None:
        """A consumer that watches on (settle_shared.lua) and stops asking (its fetch
        ended) leaves the waiters, so the next in the ring watches instead."""
        if not self._watching:
            return None
        self._watching = False
        return self._leave()

    def _acks(self, acks: Sequence[str]) -> list[Any]:
        """Acknowledgements for a script that makes them behind its own check
        (ack_shared.lua, ack_tap.lua, join_shared.lua): how many were dealt with a
        redelivery count, then the ids, those first. Only their counts are dropped: an event
        dealt without a count gets one only if it is dealt again (this consumer's lease
        lapsed, or its acknowledgement was lost), and its next holder drops it; a count left
        behind goes at the housekeeping after its event is trimmed (trim.lua). An `HDEL` of
        every id cost the server about 3 % of a serial consumer's work per event."""
        counted = self._counted.intersection(acks) if self._counted else set()
        if not counted:
            return [0, *acks]
        return [len(counted), *counted, *(i for i in acks if i not in counted)]

    def fetch_failed(self) -> None:
        """Not sent (or the reply lost): the acks go with the next fetch, through the
        dispatcher."""
        self._carried(self._in_flight, made=False)
        self._in_flight = []
        self.tap_open, self.wait_open = False, 0

    def _carried(self, acks: list[str], *, made: bool) -> None:
        """The acks a fetch carried: made, their redelivery counts were dropped with them;
        not made (not sent, or refused behind a closed tap or door), they go with the
        next fetch, through the dispatcher."""
        if not made:
            self.to_ack[:0] = acks
        elif self._counted:
            self._counted.difference_update(acks)

    def on_fetch(self, replies: Sequence[Any]) -> Dealt:
        acks, self._in_flight = self._in_flight, []
        if self._stage == "wait":
            return self._on_wait(acks, replies)
        if self._fast:
            return self._on_tap(acks, replies)
        self._carried(acks, made=True)  # by the dispatcher (DETACHED raises instead)
        reply, pending, *tapped = replies  # the read through the tap, if the fetch sent it
        newest, rung, flat, _buried, version, by, *taps = reply
        tap = taps[0] if taps else 0
        if self.pooled:  # keyed: its own bell's newest id, to wait from (`wait`)
            self._chime, self._watching = text(taps[1]), tap == KEYED_WATCH
        new = (tapped[0] or []) if tapped else []
        self._took = len(new)
        self.tap_open = self.serial and tap == 1 and tapped[0] is not None
        self.wait_open = READY if tap == READY else 0
        # fetch again at once: a serial read blocked already; a shared wait is the next read
        waited = (self.serial and tap == 1 and self._block_ms > 0) or self.wait_open > 0
        notice = None
        if self.selector is not None and version > self.store_version and text(by) != self.id:
            self.store_version = version
            notice = (
                f"consumer {text(by)} attached with a filter of its own: from now on the "
                f"durable keeps only events that filter matches; this consumer still takes "
                f"events by its own filter ({self.selector.expression})"
            )
        events = self._events([*pending, *new], parsed.counts(flat))
        self._busy = len(pending) + len(new) >= 2
        return Dealt(text(newest), text(rung), events, notice, waited)

    def _on_wait(self, acks: list[str], replies: Sequence[Any]) -> Dealt:
        joined, *_reads, (then, counts), pending = replies
        self._carried(acks, made=bool(joined))  # not made: its door was closed
        if not joined and acks:  # still pending here: not handed out again
            back = set(acks)
            pending = [entry for entry in pending if entry[0].decode() not in back]
        self.wait_open, self._watching = (READY if then else 0), then == 2
        return Dealt("", "", self._events(pending, counts), None, waited=True)

    def _on_tap(self, acks: list[str], replies: Sequence[Any]) -> Dealt:
        renewed, new = replies
        self._carried(acks, made=bool(renewed))  # not made: its tap was closed
        self.tap_open = bool(renewed) and new is not None
        self._took = len(new or ())
        # blocked through the tap, or found it closed: either way, fetch again at once
        return Dealt("", "", self._events(new or [], {}), None, waited=True)

    def _events(self, entries: Sequence[Any], counts: dict[str, int]) -> list[Event]:
        """Events of entries read, each handed out once; `counts`: the redelivery counts
        the script gave (remembered, so the acknowledgement drops them)."""
        if counts:
            self._counted.update(counts)
        channel, handed = self.k.channel, self.handed
        acked, acked_before = self._acked, self._acked_before  # acknowledged lately
        built = [event_from_entry(channel, entry, counts) for entry in entries]
        duplicate = self.seen.duplicate
        ids = [event.id for event in built if event is not None and not duplicate(event)]
        # The usual batch, checked by whole-set operations: nothing trimmed, lately
        # acknowledged or handed out already, no id twice (the size grows by all of them).
        rolled_back = self._rolled_back
        if (
            len(ids) == len(built)
            and handed.isdisjoint(ids)
            and acked.isdisjoint(ids)
            and acked_before.isdisjoint(ids)
            and (not rolled_back or rolled_back.isdisjoint(ids))
        ):
            before = len(handed)
            handed.update(ids)
            if len(handed) - before == len(ids):
                return cast(list[Event], built)
            handed.difference_update(ids)  # none was there before: as it was
        events: list[Event] = []
        fresh = set(ids)  # not stored twice
        for entry, event in zip(entries, built, strict=True):
            if event is None:  # trimmed while pending: nothing to deliver
                self.to_ack.append(entry[0].decode())
            elif event.id in acked or event.id in acked_before or event.id not in fresh:
                self.to_ack.append(event.id)  # the ack was lost, or stored twice
                self.discarded += 1
            elif event.id in rolled_back and event.id not in counts:
                continue  # read before its rollback ran: it comes again, counted
            elif event.id not in handed:
                rolled_back.discard(event.id)
                handed.add(event.id)
                events.append(event)
        return events

    def wait(self, newest: str, rung: str, seconds: float, *, read: bool = True) -> list[Op[Any]]:
        """Block until the stream grows or the bell rings (events dealt, window room).

        A keyed consumer also wakes when its own bell rings (lib/watch.lua: unless it
        watches, `newest` and `rung` are the last possible id, and only its own bell wakes
        it), and with `read` its pending list is read right behind the wait, in the same
        round trip: a consumer rung because another's fetch dealt it events has them without
        a fetch of its own (`on_wait`)."""
        block = max(1, int(seconds * 1000))
        if not self.pooled:
            return [command("XREAD", "COUNT", 1, "BLOCK", block, "STREAMS", self.k.stream,
                            self.k.bell(self.durable), newest, rung,
                            context=self.context)]  # fmt: skip
        wait: Op[Any] = command("XREAD", "COUNT", 1, "BLOCK", block, "STREAMS",
                                self.k.stream, self.k.bell(self.durable), self._fetch_keys[13],
                                newest, rung, self._chime, context=self.context)  # fmt: skip
        if not read:
            return [wait]
        counted = command("EXISTS", self.k.redeliveries(self.durable), parse=as_int,
                          context=self.context)  # fmt: skip
        return [wait, self._pending(), counted]

    def on_wait(self, replies: Sequence[Any]) -> list[Event]:
        """The events a keyed consumer's wait brought (`wait` with `read`): those of its
        pending list it does not hold yet, unless some event of the durable has a
        redelivery count (the read carries none: then the next fetch brings them, counted)."""
        if len(replies) < 3:
            return []
        _rung, pending, counted = replies
        if counted or not pending:
            return []
        return self._events(pending, {})

    def commit(self, events: Sequence[Event]) -> None:
        """Acknowledge events handed out here (an event rolled back, acknowledged already,
        or no longer this consumer's after it was detached is not acknowledged again)."""
        handed = self.handed
        ids = [e.id for e in events if e.id in handed]
        handed.difference_update(ids)
        self.to_ack.extend(ids)
        self._remember(ids)

    def _remember(self, ids: Sequence[str]) -> None:
        """Keep at least the last RECENT_ACKS acknowledged ids (and at most twice that), to
        discard them if they come back: two generations of sets, the older dropped whole
        when the newer is full, so remembering costs one set update per batch."""
        self._acked.update(ids)
        if len(self._acked) >= RECENT_ACKS:
            self._acked_before, self._acked = self._acked, set()

    def flush(self) -> list[Op[Any]]:
        """The deferred acks now. They ring the bell only when a fetch may wait for them
        (`_rings`)."""
        acks, self.to_ack = self.to_ack, []
        if not acks:
            return []
        args = [self.durable, self.id, self._token, *self._acks(acks)]
        if self._counted:
            self._counted.difference_update(acks)
        keys: tuple[str, ...] = self._ack_keys
        if self.pooled:  # keyed: the keys acknowledged are free, maybe for another member
            keys = (*keys, self._fetch_keys[8], self._fetch_keys[15])  # the bell, the holds
        elif self._rings(len(acks)):
            keys = (*keys, self._fetch_keys[8])  # the bell
        return [script("ack_shared", keys, args,
                       parse=partial(parsed.acks_made, self.context, len(acks)),
                       context=self.context)]  # fmt: skip

    def _rings(self, acked: int) -> bool:
        """Whether acknowledging `acked` events (handed out, now acknowledged) may free
        what a blocked fetch waits for. A serial line is free once its holder holds
        nothing: the other members' fetches, and this one's, wait for the bell while it
        holds anything. A shared window that was full: this consumer's own fetch waits for
        room; the others' do not wait for this consumer's room (dealing leaves nothing
        undealt while a member with room takes it). Anything else would wake the waiters
        for nothing, at about a quarter of the acknowledgement's cost."""
        held = len(self.handed)
        if self.serial:
            return held == 0
        return held + acked + len(self._in_flight) >= self.window

    def rollback(self, events: Sequence[Event], delay_s: float) -> Op[Any] | None:
        if not events:
            return None
        ids = [e.id for e in events]
        self.handed.difference_update(ids)
        self._counted.difference_update(ids)  # counted again when dealt again
        if len(self._rolled_back) >= RECENT_ACKS:  # most went to others: the oldest go
            self._rolled_back.clear()
        self._rolled_back.update(ids)
        self.tap_open, self.wait_open = False, 0  # the script closes every tap: these first
        k, d = self.k, self.durable
        return script("rollback_shared", [k.stream, k.redo(d), k.delayed(d), k.redeliveries(d),
                                          k.bell(d), k.taps(d), k.tally(d)],
                      [d, self.id, int(delay_s * 1000), *ids], context=self.context)  # fmt: skip

    def release(self, unhanded: Sequence[Event]) -> list[Op[Any]]:
        """Flush the acks and leave the ring; events handed out and not acked are dealt again."""
        ops = self.flush()
        handed = sorted(self.handed.difference(e.id for e in unhanded))
        self.handed.clear()
        self.tap_open, self.wait_open = False, 0
        k, d = self.k, self.durable
        ops.append(script("release_shared", [k.stream, k.members(d), k.alive(d), k.ring(d),
                                             k.redo(d), k.redeliveries(d), k.bell(d),
                                             k.taps(d), k.tally(d)],
                          [d, self.id, *handed], context=self.context))  # fmt: skip
        return ops


__all__ = ["READY", "RECENT_ACKS", "TAP_CLOSED", "TAP_GRACE_MS", "Dealt", "SharedHandout"]
