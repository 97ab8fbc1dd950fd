"""The exclusive consumer's state machine, without I/O.

Every holder reads as a consumer of its own (its token), so a new holder claims its
predecessors' pending events at attach and gets them first. Each read is one round
trip and one atomic step on the server (`read_exclusive.lua`): the lease check, its
renewal, the deferred cumulative ack and the `XREADGROUP`, so a holder paused past its
lease reads nothing once another holder took over. Waiting for new events takes none
(`XREAD BLOCK`); the fenced read follows the wake-up. The reader asks this class what to
send (`read()`), sends it, and hands back what came (`on_read`).

Redelivery counts are ours (the PEL's count also rises on history reads): on a
fresh attach every pending event counts one more delivery, except those rolled
back (seed 003: count and flag unchanged) or read but never handed out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import ids, keys
from ..events import Event, event_from_entry
from ..selector import Selector
from .base import Op, as_bool, command, script


def _read_reply(reply: Any) -> tuple[list[Any], str]:
    entries, top = reply
    return list(entries), top.decode() if isinstance(top, bytes) else str(top)


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
        self.top = "0-0"  # the newest entry seen when a read found nothing new: wait after it
        self.counts: dict[str, int] = {}
        self.cursor = "0"  # re-read own pending events first, then '>'
        self.limit: tuple[int, int] | None = None  # first rolled-back id: acks stop below it
        self.skipped: str | None = None  # last id the filter skipped, to ack with the rest
        self.deferred: str | None = None  # cumulative ack to send with the next read
        self.handed: tuple[int, int] = (0, 0)  # newest id handed to the application
        self.resumed_below: tuple[int, int] | None = None  # after a re-attach: held already
        self._in_flight: str | None = None
        self.discarded = 0
        """Events read again after a re-attach that the application already had."""

    # -- attaching and the lease ----------------------------------------------------------

    def attach(self) -> Op[dict[str, int]]:
        """Take the lease and inherit the pending events: their redelivery counts come back."""
        k = self.k
        return script(
            "attach_exclusive",
            [k.stream, k.durables, k.lease(self.durable), k.redeliveries(self.durable),
             k.keep(self.durable)],
            [self.durable, self.token, self.lease_ms],
            parse=_counts, context=self.context,
        )  # fmt: skip

    def on_attach(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def on_reattach(self, counts: dict[str, int]) -> None:
        """Attached again after an outage (same token): read the own pending events anew,
        but not hand out again those the application already has (it acks them)."""
        self.counts = counts
        self.cursor = "0"
        self.resumed_below = self.handed

    def renew(self) -> Op[bool]:
        return script("renew_lease", [self.k.lease(self.durable)], [self.token, self.lease_ms],
                      parse=as_bool, context=self.context)  # fmt: skip

    # -- reading --------------------------------------------------------------------------

    def read(self) -> Op[tuple[list[Any], str]]:
        """The fenced read: lease check, renewal, deferred ack and `XREADGROUP` at the
        cursor, in one script."""
        self._in_flight, self.deferred = self.deferred, None
        args = [self.durable, self.token, self.lease_ms, self._in_flight or "", self.batch,
                self.cursor]  # fmt: skip
        return script("read_exclusive", self._fence_keys, args, parse=_read_reply,
                      context=self.context)  # fmt: skip

    def read_failed(self) -> None:
        """The read was not sent (or its reply lost): the deferred ack goes with the next."""
        if self._in_flight is not None and self.deferred is None:
            self.deferred = self._in_flight
        self._in_flight = None

    def on_read(self, reply: tuple[list[Any], str]) -> tuple[list[Event], bool]:
        """(events, again): `again` when the inherited history is done and the new events
        should be read at once."""
        self._in_flight = None
        entries, top = reply
        if top:
            self.top = top
        if self.cursor != ">":  # own pending events first (a takeover's inheritance)
            self.cursor = entries[-1][0].decode() if entries else ">"
            return self.events(entries), not entries
        return self.events(entries), False

    def wait(self, seconds: float) -> Op[bool]:
        """Block until the stream has an entry after the newest one seen, taking nothing:
        only the fenced read takes events, so a holder paused while it waits cannot take
        events another holder should have. True when something came."""
        return command("XREAD", "COUNT", 1, "BLOCK", max(1, int(seconds * 1000)),
                       "STREAMS", self.k.stream, self.top,
                       parse=bool, context=self.context)  # fmt: skip

    def events(self, entries: Sequence[Any]) -> list[Event]:
        channel, counts, selectors = self.k.channel, self.counts, self.selectors
        # History reads after a re-attach skip what the application holds already; new
        # reads skip what is not new: a group whose last-delivered-id went back (an AOF
        # restart, a failover before the XACKs replicated) offers acknowledged events again
        held = self.resumed_below if self.cursor != ">" else self.handed
        events = []
        for entry in entries:
            if held is not None and ids.key(entry[0].decode()) <= held:
                self.discarded += 1
                if self.cursor == ">":
                    self._skip(entry[0].decode())
                continue  # handed out before: the application has (or had) it
            event = event_from_entry(channel, entry, counts)
            if event is None or (
                selectors and not all(s.matches(event.key, event.properties) for s in selectors)
            ):
                self._skip(entry[0].decode())  # acknowledged with the next cumulative ack
                continue
            events.append(event)
        if events:
            self.handed = max(self.handed, ids.key(events[-1].id))
        return events

    def _skip(self, event_id: str) -> None:
        if self.skipped is None or ids.key(event_id) > ids.key(self.skipped):
            self.skipped = event_id

    # -- acknowledging --------------------------------------------------------------------

    def _ack(self, upto: str) -> Op[Any]:
        args = [self.durable, self.token, self.lease_ms, upto]
        return script("ack_exclusive", self._fence_keys, args, context=self.context)

    def commit(self, events: Sequence[Event], *, defer: bool = False) -> Op[Any] | None:
        """Cumulative ack of the latest of `events` (and of skipped ones), never reaching a
        rolled-back event; deferred, it rides along with the next read (None to send now)."""
        candidates = [e.id for e in events]
        if self.skipped is not None:
            candidates.append(self.skipped)
        allowed = [i for i in candidates if self.limit is None or ids.key(i) < self.limit]
        if not allowed:
            return None
        upto = max(allowed, key=ids.key)
        if not defer:
            return self.ack_upto(upto)
        self.deferred = upto
        if self.skipped is not None and ids.key(self.skipped) <= ids.key(upto):
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
        return command("SADD", self.k.keep(self.durable), *(e.id for e in events),
                       context=self.context)  # fmt: skip

    def release(self, unhanded: Sequence[Event]) -> list[Op[Any]]:
        """Send the deferred ack, then give up the lease (unhanded events keep their count)."""
        ops = [] if self.deferred is None else [self.ack_upto(self.deferred)]
        release_keys = [self.k.lease(self.durable), self.k.keep(self.durable)]
        args = [self.token, *(e.id for e in unhanded)]
        ops.append(script("release_exclusive", release_keys, args, context=self.context))
        return ops
