"""The exclusive consumer's state machine, without I/O (layer 2, as `ops/`): what to send
next and what a reply means. Its reader (`reader.ExclusiveReader`, beside it) sends.

Every holder reads as a consumer of its own (its token), so a new holder claims its
predecessors' pending events at attach and gets them first. Each read is one round
trip: the deferred cumulative ack (`ack_exclusive.lua`, which also proves and renews the
lease), then `XREADGROUP` of the channel's stream together with the holder's gate, an
empty stream of its own: a new holder deletes the others' gates when it attaches, so a
holder paused past its lease reads nothing once another took over (its read, or its
blocked wait, fails with NOGROUP / UNBLOCKED, which means `LeaseLostError`). The server
checks both streams' groups before it reads either, so the fence costs no round trip and
no script. The reader asks this class what to send (`read()`), sends it, and hands back
what came (`on_read`).

Redelivery counts are ours (the PEL's count also rises on history reads): on a
fresh attach every pending event counts one more delivery, except those rolled
back (Universal Messaging's rollback keeps count and flag) or read but never handed out.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Any

from redis.exceptions import ResponseError

from ... import ids, keys
from ...errors import LeaseLostError
from ...events import Event, SeenMessages, event_from_entry
from ...ops.base import Op, as_bool, command, script
from ...reply_parsers import error_word, streams_read
from ...selector import Selector
from ...verdicts import translate

MAX_KNOWN = 1000
"""Most ids named to `ack_exclusive.lua` in one acknowledgement (Lua's unpack has a limit);
beyond, the script looks them up."""

GATE_GONE = frozenset({"NOGROUP", "UNBLOCKED"})
"""A read's error words that go to its parser: the gate (or the channel) is gone."""


def _gated(gate: str, context: str) -> Callable[[Any], list[Any]]:
    """The parser of a gated read: the channel's entries, or `LeaseLostError` when the
    holder's gate is gone (another holder took over)."""

    def parse(reply: Any) -> list[Any]:
        if isinstance(reply, ResponseError):
            word, rest = error_word(reply)
            if (word == "NOGROUP" and gate in rest) or (
                word == "UNBLOCKED" and "no longer exists" in rest
            ):
                raise LeaseLostError(f"{context}: another consumer took the durable over")
            raise translate(reply, context)
        return [
            entry for key, entries in streams_read(reply) if key != gate_bytes for entry in entries
        ]

    gate_bytes = gate.encode()
    return parse


def _counts(flat: Any) -> dict[str, int]:
    return {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}


class ExclusiveCursor:
    """Where one exclusive holder stands: its read cursor, deferred ack and rollback limit."""

    def __init__(
        self,
        k: keys.ChannelKeys,
        durable: str,
        token: str,
        *,
        lease_ms: int,
        batch: int,
        selectors: Sequence[Selector] = (),
    ) -> None:
        self.k, self.durable, self.token = k, durable, token
        self.lease_ms, self.batch = lease_ms, batch
        self.selectors = list(selectors)
        self.context = f"exclusive durable {durable!r} on {k.channel!r}"
        self._fence_keys = (k.stream, k.lease(durable), k.redeliveries(durable), k.keep(durable))
        self.gate = k.gate(durable, token)
        self._parse = _gated(self.gate, self.context)
        self._attaches = 0
        self.counts: dict[str, int] = {}
        self.cursor = "0"  # re-read own pending events first, then '>'
        self.limit: tuple[int, int] | None = None  # first rolled-back id: acks stop below it
        self.skipped: str | None = None  # last id the filter skipped, to ack with the rest
        self.deferred: str | None = None  # cumulative ack to send with the next read
        self.handed: tuple[int, int] = (0, 0)  # newest id handed to the application
        self._handed_before = self.handed  # before the last read's events (`withdraw`)
        self._skipped_before: str | None = None  # before the last read (`withdraw`)
        self.resumed_below: tuple[int, int] | None = None  # after a re-attach: held already
        self._in_flight: str | None = None
        self._sent: str | None = None  # the last cumulative ack made (`ack_refused`)
        self.discarded = 0
        """Events not handed out: read again after a re-attach that the application already
        had, or a publish stored twice (`SeenMessages`)."""
        self.seen = SeenMessages()
        self.unacked: list[str] = []
        """Ids handed out since the last ack, in id order (`_known`)."""

    # -- attaching and the lease ----------------------------------------------------------

    def attach(self, dead: str = "") -> Op[dict[str, int]]:
        """Take the lease and inherit the pending events: their redelivery counts come back.
        `dead`: the token of a holder whose process is surely gone, whose lease may be taken
        before it lapses."""
        k = self.k
        return script(
            "attach_exclusive",
            [
                k.stream,
                k.durables,
                k.lease(self.durable),
                k.redeliveries(self.durable),
                k.keep(self.durable),
                k.gates(self.durable),
                self.gate,
                k.tally(self.durable),
            ],
            [self.durable, self.token, self.lease_ms, dead],
            parse=_counts,
            context=self.context,
        )

    def regate(self) -> None:
        """A gate of its own for the next attach (after an outage): a read this holder sent
        before it, held in a stalled network and landing after the attach, names a gate
        that attach deleted, and reads nothing (its events would sit in the pending list,
        never read again by this holder)."""
        self._attaches += 1
        self.gate = self.k.gate(self.durable, f"{self.token}~{self._attaches}")
        self._parse = _gated(self.gate, self.context)

    def on_attach(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def on_reattach(self, counts: dict[str, int]) -> None:
        """Attached again after an outage (same token): read the own pending events anew,
        but not hand out again those the application already has (it acks them)."""
        self.counts = counts
        self.cursor = "0"
        self.resumed_below = self.handed
        self.unacked = []  # read again from the pending list, in order

    def renew(self) -> Op[bool]:
        return script(
            "renew_lease",
            [self.k.lease(self.durable)],
            [self.token, self.lease_ms],
            parse=as_bool,
            context=self.context,
        )

    # -- reading --------------------------------------------------------------------------

    def read(self, seconds: float = 0.0) -> list[Op[Any]]:
        """The deferred ack, if any (it proves and renews the lease too), then the gated
        `XREADGROUP` at the cursor; reading new events, it blocks up to `seconds` (0: not
        at all) for them to come, in the same round trip. Gated: once another holder took
        over, the read (blocked or not) fails instead of taking events."""
        self._in_flight, self.deferred = self.deferred, None
        block = ("BLOCK", max(1, int(seconds * 1000))) if seconds > 0 and self.cursor == ">" else ()
        read = command(
            "XREADGROUP",
            "GROUP",
            self.durable,
            self.token,
            "COUNT",
            self.batch,
            *block,
            "STREAMS",
            self.k.stream,
            self.gate,
            self.cursor,
            ">",
            parse=self._parse,
            context=self.context,
            tolerate=GATE_GONE,
        )
        if self._in_flight is None:
            return [read]
        return [self._ack(self._in_flight), read]

    def read_failed(self) -> None:
        """The read was not sent, or its reply was lost (an outage, or an asyncio fetch
        cancelled while it awaited the reply): the deferred ack goes with the next, and a
        read of new events may have taken some that were never handed out, so the next
        read looks at the pending list first (`_pending_next`)."""
        if self._in_flight is not None and self.deferred is None:
            self.deferred = self._in_flight
        self._in_flight = None
        if self.cursor == ">":
            self._pending_next()

    def _pending_next(self) -> None:
        """Read this holder's own pending events past the newest handed out before new
        ones: events a read took but the application never got would otherwise sit in the
        pending list until a later event's cumulative ack acknowledged them unseen."""
        ms, seq = self.handed
        self.cursor = f"{ms}-{seq}"
        self.resumed_below = self.handed

    def on_read(self, replies: Sequence[Any]) -> tuple[list[Event], bool]:
        """(events, again): `again` when the inherited history is done and the new events
        should be read at once. `reply_parsers` are those of `read()`'s operations."""
        self._in_flight = None
        entries = replies[-1]
        if self.cursor != ">":  # own pending events first (a takeover's inheritance)
            self.cursor = entries[-1][0].decode() if entries else ">"
            return self.events(entries), not entries
        return self.events(entries), False

    def events(self, entries: Sequence[Any]) -> list[Event]:
        channel, counts, selectors = self.k.channel, self.counts, self.selectors
        # History reads after a re-attach skip what the application holds already; new
        # reads skip what is not new: a group whose last-delivered-id went back (an AOF
        # restart, a failover before the XACKs replicated) offers acknowledged events again.
        # Entries come in id order, so only a leading run can be held.
        held = self.resumed_below if self.cursor != ">" else self.handed
        self._handed_before, self._skipped_before = self.handed, self.skipped
        start = 0
        if held is not None:
            while start < len(entries) and ids.key(entries[start][0].decode()) <= held:
                self.discarded += 1
                if self.cursor == ">":
                    self._skip(entries[start][0].decode())
                start += 1  # handed out before: the application has (or had) it
        rest = entries[start:] if start else entries
        if not selectors:  # the usual: every entry an event, none stored twice
            fresh = self.seen.remember_all([event_from_entry(channel, e, counts) for e in rest])
            if fresh is not None:
                return self._handing(fresh)
        events = []
        for entry in rest:
            event = event_from_entry(channel, entry, counts)
            if event is None or (
                selectors and not all(s.matches(event.key, event.properties) for s in selectors)
            ):
                self._skip(entry[0].decode())  # acknowledged with the next cumulative ack
                continue
            if self.seen.duplicate(event):
                self.discarded += 1
                self._skip(event.id)
                continue
            events.append(event)
        return self._handing(events)

    def _handing(self, events: list[Event]) -> list[Event]:
        """`events` handed out: the newest handed and the unacknowledged ids follow."""
        if events:
            self.handed = max(self.handed, ids.key(events[-1].id))
            self.unacked += [event.id for event in events]
        return events

    def withdraw(self, events: Sequence[Event]) -> None:
        """The events of the last read were not handed to the application after all (the
        lease was lost meanwhile, the read came after a reconnection not yet followed by
        an attach, or an asyncio fetch was cancelled while it checked the lease): the next
        read (or attach) reads them again. What that read skipped is not acknowledged
        either: a cumulative ack up to it would cover the events withdrawn."""
        gone = {event.id for event in events}
        self.unacked = [i for i in self.unacked if i not in gone]
        self.handed = self._handed_before
        self.skipped = self._skipped_before
        self._pending_next()

    def _skip(self, event_id: str) -> None:
        if self.skipped is None or ids.key(event_id) > ids.key(self.skipped):
            self.skipped = event_id

    # -- acknowledging --------------------------------------------------------------------

    def ack_refused(self) -> None:
        """The last cumulative ack sent was refused (the lease had lapsed): it goes again
        with the first read after attaching again."""
        sent = self._sent
        if sent is not None and (self.deferred is None or ids.key(self.deferred) < ids.key(sent)):
            self.deferred = sent

    def _ack(self, upto: str) -> Op[Any]:
        self._sent = upto
        args = [self.durable, self.token, self.lease_ms, upto, *self._known(upto)]
        return script("ack_exclusive", self._fence_keys, args, context=self.context)

    def _known(self, upto: str) -> list[str]:
        """The ids read since the last ack, up to `upto`, for the script to acknowledge
        without looking them up (a hint: lost with a lost reply, the script finds the rest
        in the pending list)."""
        unacked = self.unacked
        if not unacked:
            return []
        bound = ids.key(upto)
        # usually all of them: one id parsed, not a search
        cut = (
            len(unacked)
            if ids.key(unacked[-1]) <= bound
            else bisect_right(unacked, bound, key=ids.key)
        )
        known, self.unacked = unacked[:cut], unacked[cut:]
        return known if len(known) <= MAX_KNOWN else []

    def commit(self, events: Sequence[Event], *, defer: bool = False) -> Op[Any] | None:
        """Cumulative ack of the latest of `events` (and of skipped ones), never reaching a
        rolled-back event; deferred, it rides along with the next read (None to send now).
        Events are handed out in id order, so the latest allowed is the last one below the
        rollback limit."""
        limit, upto = self.limit, None
        for event in reversed(events):
            if limit is None or ids.key(event.id) < limit:
                upto = event.id
                break
        skipped = self.skipped
        if (
            skipped is not None
            and (limit is None or ids.key(skipped) < limit)
            and (upto is None or ids.key(skipped) > ids.key(upto))
        ):
            upto = skipped
        if upto is None:
            return None
        if not defer:
            return self.ack_upto(upto)
        self.deferred = upto
        if skipped is not None and ids.key(skipped) <= ids.key(upto):
            self.skipped = None
        return None

    def ack(
        self, event: Event, outstanding: list[Event], *, defer: bool = False
    ) -> tuple[Op[Any] | None, list[Event]]:
        """An explicit ack of `event` and all before it: the op (None when deferred to ride
        with the next read), and what stays outstanding."""
        upto = ids.key(event.id)
        if defer:
            op = None
            if self.deferred is None or ids.key(self.deferred) < upto:
                self.deferred = event.id
        else:
            op = self.ack_upto(event.id)
        if self.limit is not None and self.limit <= upto:
            self.limit = None  # an explicit cumulative ack went past the rolled-back event
        return op, [e for e in outstanding if ids.key(e.id) > upto]

    def flush(self) -> Op[Any] | None:
        """The deferred ack now, if one waits."""
        return None if self.deferred is None else self.ack_upto(self.deferred)

    def ack_upto(self, event_id: str) -> Op[Any]:
        if self.deferred is not None and ids.key(self.deferred) > ids.key(event_id):
            event_id = self.deferred  # a deferred ack that never went out goes now
        self.deferred = None
        if self.skipped is not None and ids.key(self.skipped) <= ids.key(event_id):
            self.skipped = None
        return self._ack(event_id)

    def rollback(self, events: Sequence[Event]) -> Op[Any] | None:
        """Seed 003: the events come back at the next subscription (a delay cannot apply)."""
        if not events:
            return None
        first = min(ids.key(e.id) for e in events)
        self.limit = first if self.limit is None else min(self.limit, first)
        return script(
            "add_members", [self.k.keep(self.durable)], [e.id for e in events], context=self.context
        )

    def release(self, unhanded: Sequence[Event]) -> list[Op[Any]]:
        """Send the deferred ack, then give up the lease (unhanded events keep their count)."""
        ops = [] if self.deferred is None else [self.ack_upto(self.deferred)]
        release_keys = [
            self.k.lease(self.durable),
            self.k.keep(self.durable),
            self.k.gates(self.durable),
            self.gate,
        ]
        args = [self.token, *(e.id for e in unhanded)]
        ops.append(script("release_exclusive", release_keys, args, context=self.context))
        return ops


__all__ = ["GATE_GONE", "MAX_KNOWN", "ExclusiveCursor"]
