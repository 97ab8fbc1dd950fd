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

A serial holder with a window of READ_AHEAD_WINDOW or more reads ahead inside it: each
read through its tap takes at most half the window, and `ahead` makes the next read, which
its reader sends before handing the events out (`flows.Post`) and collects at the next
fetch, so the server reads while the application works. What was read ahead is held, not
handed out: a rollback takes it back behind the events handed back, a release uncounted,
and a read whose consumer attached again, rolled back or failed meanwhile is not handed
out as it comes (`_generation`).

What was handed out and acknowledged is remembered in the consumer's `Ledger` (beside).

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
from typing import Any

from ... import keys
from ...events import Event
from ...key_hash import key_hash
from ...ops.base import Op
from ...reply_parsers import text
from ...selector import Selector
from . import handout_replies as parsed
from .handout_ops import TAP_CLOSED, HandoutOps
from .handout_replies import Dealt
from .ledger import Ledger

log = logging.getLogger(__name__)
READY = 2
"""An idle shared consumer may join the waiters (lib/settle.lua): its door is open."""

KEYED_WATCH = 3
"""An idle keyed consumer watches the channel for the others (lib/watch.lua)."""

TAP_GRACE_MS = 1000
"""A tap outlives the read's block by this much (as `fetch_shared.lua` opens it): a
consumer that stops asking lets it expire, and the line passes on."""

READ_AHEAD_WINDOW = 16
"""A serial consumer with a window this large or larger reads ahead (`SharedHandout.ahead`);
a smaller window is a choice of how many events to take at a time, and is kept whole."""


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
        self.ops = HandoutOps(k, durable, consumer_id, self.context)
        self.ledger = Ledger(k.channel)
        self.handed = self.ledger.handed  # handed to the application, not yet acked
        self.to_ack: list[str] = []  # deferred acks, sent with the next fetch
        self.store_version = 0
        self._in_flight: list[str] = []
        self.reads_ahead = self.serial and window >= READ_AHEAD_WINDOW
        """A serial holder reads ahead inside its window (`ahead`): each read through its
        tap takes at most half of it, and the next read goes out before the application
        handles what the last one brought. The reader does not where it cannot
        (`replicated`: a read must be confirmed by the replicas before it is handed out)."""
        self._generation = 0
        """Counts what makes a serial holder's read (ahead, or in flight on another thread)
        no longer this consumer's to hand out as it comes (an attach, a rollback, which
        takes back what was read ahead, a release, a fetch that failed): `on_fetch` leaves
        such a read's events to the next fetch's read of the pending list."""
        self._sent_in = 0  # the generation the fetch in flight was sent in
        self._took = 0  # events the last read through a tap took
        self._asked = 0  # how many the last read through a tap asked for
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
        tree = json.dumps(self.selector.to_json()) if self.selector else ""
        self._token = secrets.token_hex(4)
        hashed = key_hash(self.id)  # kept for a keyed durable's dealing (lib/key_hash.lua)
        return self.ops.attach(self.window, self.lease_ms, tree, self._token, hashed)

    def on_attach(self, attached: tuple[int, bool]) -> None:
        self._generation += 1
        self.store_version, member = attached
        self.tap_open, self.wait_open = False, 0  # attaching closes every tap
        if not member:
            self.forget()

    def forget(self) -> None:
        """Joined as a new member: anything this consumer held was dealt again when it was
        detached (a lease that lapsed in a pause or an outage), so its acknowledgements
        are no longer its to send: the events' new holders own them."""
        self.ledger.forget([*self.to_ack, *self._in_flight])
        self.to_ack, self._in_flight = [], []

    @property
    def discarded(self) -> int:
        """Exact duplicates not handed out again (`Ledger.discarded`)."""
        return self.ledger.discarded

    def renew(self) -> Op[bool]:
        return self.ops.renew(self.lease_ms)

    def fetch(self, seconds: float = 0.0) -> list[Op[Any]]:
        """The dispatcher (with the deferred acks), this consumer's pending events, then new
        events through its tap if the dispatcher opened one, blocking up to `seconds` if
        nothing comes (0: not at all). While the tap stays open and this consumer holds
        nothing, the fetch is the acks and the read through the tap alone (`_tap_fetch`)."""
        self._in_flight, self.to_ack = self.to_ack, []
        self._block_ms = max(1, int(seconds * 1000)) if seconds > 0 else 0
        self._fast = self.serial and self.tap_open and not self.handed
        self._stage, self._sent_in = "deal", self._generation
        if self._fast:
            return self._tap_fetch()
        room = self.window - len(self.handed)
        # shared: read through a tap only while busy (an idle consumer's fetch brings an
        # event or none, and a read that fails costs it more than it saves); idle and
        # blocking, wait through it (lib/settle.lua)
        shared = not self.serial and not self.pooled
        tapping = shared and self._busy and room >= 2
        # keyed: idle and blocking, it watches or waits for its own bell (lib/watch.lua)
        waiting = not self.serial and not tapping and self._block_ms > 0 and room >= 1
        took = self._took if self.serial else (1 if tapping else 2 if waiting else 0)
        if waiting and self.wait_open and not self.pooled:
            return self._wait()
        deal = self.ops.dispatch(self._dispatcher, [self.lease_ms, len(self.handed), took,
                                                    self._block_ms, *self._in_flight])  # fmt: skip
        read = self._pending()
        if self.serial:
            return [deal, read, self._tap_read(self._serial_count(room))]
        if not tapping:
            return [deal, read]
        # a shared durable's tap: the rest of the room, when the script dealt the caller
        # the first new event (deal_first); never blocking, as others may gain room
        return [deal, read, self._tap_read(room - 1, block=False)]

    def _tap_read(self, count: int, block: bool = True) -> Op[list[Any] | None]:
        """Up to `count` new events through the tap (`HandoutOps.tap_read`), blocking for
        the fetch's time unless not to `block`."""
        self._asked = count
        return self.ops.tap_read(count, self._block_ms if block else 0)

    def _tap_fetch(self, block: bool = True) -> list[Op[Any]]:
        """The steady path of a serial consumer that keeps asking: no script. The tap is
        renewed (`PEXPIRE`: 0 if it is gone, closed by whatever changed the dealing or
        expired), then read; a closed tap fails the read, and the next fetch asks the
        dispatcher."""
        acks = self.ledger.acks(self._in_flight) if self._in_flight else ()
        renew = self.ops.renew_tap(self._block_ms + TAP_GRACE_MS, acks)
        return [renew, self._tap_read(self._serial_count(self.window - len(self.handed)), block)]

    def _serial_count(self, room: int) -> int:
        """How many events a serial read through the tap asks for: the room left, and no
        more than half the window while reading ahead (the other half is for the next
        read, `ahead`)."""
        if self.reads_ahead:
            room = min(room, (self.window + 1) // 2)
        return max(1, room)

    def ahead(self, coming: int = 0) -> list[Op[Any]] | None:
        """The next read of a serial holder, to send before the application handles the
        events just read (`Post`; `coming`: how many of them are not handed out yet): its
        tap's read with the acknowledgements made so far, never blocking (a fetch decides
        then how long to wait). None when there is no read ahead to make: another kind,
        the tap closed, the window full, or no backlog (the last read took less than it
        asked for: reading ahead would cost a round trip that brings nothing)."""
        room = self.window - len(self.handed) - coming
        if not (self.reads_ahead and self.tap_open and room >= 1):
            return None
        if self._took < self._asked:  # no backlog: the next event comes to a blocked read
            return None
        self._in_flight, self.to_ack = self.to_ack, []
        self._block_ms, self._sent_in = 0, self._generation
        return self._tap_fetch(block=False)  # its reply goes to `took_ahead`

    def took_ahead(self, replies: Sequence[Any]) -> list[Any]:
        """The reply of a read ahead, settled (its acknowledgements, the tap): the entries
        it brought, to hand out (`hand_out`) once the next read ahead went out; none if
        they are no longer this consumer's to hand out as they come (`_generation`)."""
        acks, self._in_flight = self._in_flight, []
        if self._sent_in != self._generation:  # left to the next fetch's read of the pending list
            self._carried(acks, made=bool(replies[0]))
            return []
        return self._tapped(acks, replies)

    def drop_ahead(self) -> None:
        """The read ahead's events are not to be handed out (the consumer closes): they stay
        in the pending list, and go back uncounted with the release."""
        self._generation += 1

    def _pending(self) -> Op[list[Any]]:
        """This consumer's pending events (those handed out already are skipped)."""
        return self.ops.pending(self.window)

    def _wait(self) -> list[Op[Any]]:
        """An idle shared consumer's wait, one pipeline with its acks first
        (`HandoutOps.wait_shared`); its pending list, read last, brings what is its own."""
        # a burst is taken whole, and the script behind deals it round robin
        room = max(1, self.window - len(self.handed))
        self._stage = "wait"
        acks = self.ledger.acks(self._in_flight)
        return self.ops.wait_shared(self._block_ms, room, acks, self.window)

    def stop_waiting(self) -> Op[int] | None:
        """A consumer that watches on (settle_shared.lua) and stops asking (its fetch
        ended) leaves the waiters, so the next in the ring watches instead."""
        if not self._watching:
            return None
        self._watching = False
        return self.ops.leave(self._block_ms, self.pooled)

    def fetch_failed(self) -> None:
        """Not sent (or the reply lost): the acks go with the next fetch, through the
        dispatcher."""
        self._carried(self._in_flight, made=False)
        self._in_flight = []
        self.tap_open, self.wait_open = False, 0
        self._generation += 1

    def _carried(self, acks: list[str], *, made: bool) -> None:
        """The acks a fetch carried: made, their redelivery counts were dropped with them;
        not made (not sent, or refused behind a closed tap or door), they go with the
        next fetch, through the dispatcher."""
        if not made:
            self.to_ack[:0] = acks
        else:
            self.ledger.acknowledged(acks)

    def on_fetch(self, replies: Sequence[Any]) -> Dealt:
        acks, self._in_flight = self._in_flight, []
        if self._stage == "wait":
            return self._on_wait(acks, replies)
        if self.reads_ahead and self._sent_in != self._generation:
            # not handed out: taken back (a rollback), or the next fetch reads them pending
            self._carried(acks, made=not self._fast or bool(replies[0]))
            return Dealt("", "", [], None, waited=True)
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
        events = self.hand_out([*pending, *new], parsed.counts(flat))
        self._busy = len(pending) + len(new) >= 2
        return Dealt(text(newest), text(rung), events, notice, waited)

    def _on_wait(self, acks: list[str], replies: Sequence[Any]) -> Dealt:
        joined, *_reads, (then, counts), pending = replies
        self._carried(acks, made=bool(joined))  # not made: its door was closed
        if not joined and acks:  # still pending here: not handed out again
            back = set(acks)
            pending = [entry for entry in pending if entry[0].decode() not in back]
        self.wait_open, self._watching = (READY if then else 0), then == 2
        return Dealt("", "", self.hand_out(pending, counts), None, waited=True)

    def hand_out(self, entries: Sequence[Any], counts: dict[str, int] | None = None) -> list[Event]:
        """Events of entries read, each handed out once (`Ledger.hand_out`); `counts`: the
        redelivery counts the dispatcher gave."""
        return self.ledger.hand_out(entries, counts or {}, self.to_ack)

    def _tapped(self, acks: list[str], replies: Sequence[Any]) -> list[Any]:
        """The entries a read through the tap brought (its renewal's reply first), the acks
        it carried settled and the tap's state noted."""
        renewed, new = replies
        self._carried(acks, made=bool(renewed))  # not made: its tap was closed
        self.tap_open = bool(renewed) and new is not None
        self._took = len(new or ())
        return new or []

    def _on_tap(self, acks: list[str], replies: Sequence[Any]) -> Dealt:
        # blocked through the tap, or found it closed: either way, fetch again at once
        return Dealt("", "", self.hand_out(self._tapped(acks, replies)), None, waited=True)

    def wait(self, newest: str, rung: str, seconds: float, *, read: bool = True) -> list[Op[Any]]:
        """Block until the stream grows or the bell rings (events dealt, window room).

        A keyed consumer also wakes when its own bell rings (lib/watch.lua: unless it
        watches, `newest` and `rung` are the last possible id, and only its own bell wakes
        it), and with `read` its pending list is read right behind the wait, in the same
        round trip: a consumer rung because another's fetch dealt it events has them without
        a fetch of its own (`on_wait`)."""
        block = max(1, int(seconds * 1000))
        wait = self.ops.wait(block, newest, rung, self._chime if self.pooled else None)
        if not self.pooled or not read:
            return [wait]
        return [wait, self._pending(), self.ops.counted()]

    def on_wait(self, replies: Sequence[Any]) -> list[Event]:
        """The events a keyed consumer's wait brought (`wait` with `read`): those of its
        pending list it does not hold yet, unless some event of the durable has a
        redelivery count (the read carries none: then the next fetch brings them, counted)."""
        if len(replies) < 3:
            return []
        _rung, pending, counted = replies
        if counted or not pending:
            return []
        return self.hand_out(pending, {})

    def withdraw(self, events: Sequence[Event]) -> None:
        """Events read that will not be handed out (the lease lapsed while they waited:
        another consumer has them now)."""
        self.ledger.withdraw(events)

    def commit(self, events: Sequence[Event]) -> None:
        """Acknowledge events handed out here (`Ledger.commit`)."""
        self.to_ack.extend(self.ledger.commit(events))

    def flush(self) -> list[Op[Any]]:
        """The deferred acks now. They ring the bell only when a fetch may wait for them
        (`_rings`)."""
        acks, self.to_ack = self.to_ack, []
        if not acks:
            return []
        made = self.ledger.acks(acks)
        self.ledger.acknowledged(acks)
        # keyed: the keys acknowledged are free, maybe for another member (the bell, the holds)
        bell = self.pooled or self._rings(len(acks))
        return [self.ops.ack(self._token, made, len(acks), bell, holds=self.pooled)]

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
        self.ledger.roll_back(ids)
        self.tap_open, self.wait_open = False, 0  # the script closes every tap: these first
        self._generation += 1  # a read ahead brings later events: they come after these
        # what it read ahead goes back too, behind these
        kept = list(self.handed) if self.reads_ahead else None
        return self.ops.rollback(int(delay_s * 1000), ids, kept)

    def release(self, unhanded: Sequence[Event]) -> list[Op[Any]]:
        """Flush the acks and leave the ring; events handed out and not acked are dealt again."""
        ops = self.flush()
        handed = sorted(self.handed.difference(e.id for e in unhanded))
        self.handed.clear()
        self.tap_open, self.wait_open = False, 0
        self._generation += 1
        ops.append(self.ops.release(handed))
        return ops


__all__ = [
    "READ_AHEAD_WINDOW",
    "READY",
    "TAP_CLOSED",
    "TAP_GRACE_MS",
    "Dealt",
    "SharedHandout",
]
