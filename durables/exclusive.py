"""Exclusive durables: one consumer at a time (a lease), in order, cumulative ack.

Every holder reads as the group's single consumer `exclusive`, so a new holder
finds the previous holder's unacknowledged events in its own pending list and
gets them first. Reads and acks are fenced by the lease token in Lua: a holder
whose lease lapsed can neither read nor ack.

Redelivery counts are ours (the PEL's count also rises on history reads): on a
fresh attach every pending event counts one more delivery, except those rolled
back (seed 003: count and flag unchanged) or read but never handed out.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from redis.exceptions import ResponseError

from . import ids
from .events import Event, event_from_entry
from .leases import Lease, LeaseHolder
from .replies import entries_read, raw, server_errors, translate
from .scripts import pipelined

if TYPE_CHECKING:
    from .durable import Durable
    from .selector import Selector


class ExclusiveReader(LeaseHolder):
    """The server side of the one consumer attached to an exclusive durable."""

    stops_on_error = True

    def __init__(self, durable: Durable, name: str, selector: Selector | None = None) -> None:
        self.durable = durable
        self.selector = selector
        self.notices: list[str] = []
        self.client = durable.client
        self.token = f"{name}@{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        keys = durable.channel.keys
        self._stream = keys.stream
        self._lease = keys.lease(durable.name)
        self._counts_key = keys.redeliveries(durable.name)
        self._keep = keys.keep(durable.name)
        self._counts: dict[str, int] = {}
        self._cursor = "0"  # re-read own pending events first, then '>'
        self._limit: tuple[int, int] | None = None  # first rolled-back id: acks stop below it
        self._skipped: str | None = None  # last id the filter skipped, to ack with the rest
        self._deferred: str | None = None  # cumulative ack to send with the next read
        self._context = f"exclusive durable {durable.name!r} on {durable.channel.name!r}"

    def attach(self) -> None:
        with server_errors(self._context):
            flat = self.client.scripts.attach_exclusive(
                keys=[
                    self._stream,
                    self.durable.channel.keys.durables,
                    self._lease,
                    self._counts_key,
                    self._keep,
                ],
                args=[self.durable.name, self.token, self.client.lease_ms],
            )
        self._counts = {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}
        self.client.heartbeat.add(Lease(self.token, self._renew, self._on_lost))

    def _renew(self) -> bool:
        held = self.client.scripts.renew_lease(
            keys=[self._lease], args=[self.token, self.client.lease_ms]
        )
        return bool(held)

    def read(self, timeout: float) -> list[Event]:
        self._check_lease()
        deadline = time.monotonic() + timeout
        while True:
            entries = self._read(self._cursor)
            if self._cursor != ">":  # own pending events first (a takeover's inheritance)
                self._cursor = entries[-1][0].decode() if entries else ">"
                if entries:
                    return self._events(entries)
                continue
            if entries:
                return self._events(entries)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            entries = self._wait(min(remaining, self.client.settings.block_s))
            if entries:
                return self._events(entries)

    def _read(self, cursor: str) -> list[Any]:
        """Prove the lease (and send the deferred ack), then read: one round trip."""
        upto, self._deferred = self._deferred, None
        script_keys = [self._stream, self._lease, self._counts_key, self._keep]
        args = [self.durable.name, self.token, self.client.lease_ms, upto or ""]
        batch = self.client.settings.read_batch
        read = ("XREADGROUP", "GROUP", self.durable.name, self.token,
                "COUNT", batch, "STREAMS", self._stream, cursor)  # fmt: skip
        try:
            with server_errors(self._context):
                fenced, got = pipelined(
                    self.client.redis, self.client.scripts.ack_exclusive, script_keys, args, read
                )
        except BaseException:
            self._deferred = upto  # not sent: it goes with the next call
            raise
        for answer in (fenced, got):
            if isinstance(answer, ResponseError):
                raise translate(answer, self._context)  # LEASELOST: what was read stays pending
        self.client.maybe_housekeep(self.durable.channel.name)
        return entries_read(got)

    def _wait(self, seconds: float) -> list[Any]:
        """Block until new events come and take them: one round trip on wake-up. Holders
        read as consumers of their own, so even a holder whose lease lapsed while blocked
        only takes events into its own pending list, for the next holder to inherit."""
        with server_errors(self._context):
            reply = raw(
                self.client.redis, "XREADGROUP", "GROUP", self.durable.name, self.token,
                "COUNT", self.client.settings.read_batch, "BLOCK", max(1, int(seconds * 1000)),
                "STREAMS", self._stream, ">",
            )  # fmt: skip
        return entries_read(reply)

    def _events(self, entries: Sequence[Any]) -> list[Event]:
        channel, counts = self.durable.channel.name, self._counts
        selectors = [s for s in (self.durable.selector, self.selector) if s is not None]
        events = []
        for entry in entries:
            event = event_from_entry(channel, entry, counts)
            if event is None or (
                selectors and not all(s.matches(event.key, event.properties) for s in selectors)
            ):
                self._skipped = entry[0].decode()  # acknowledged with the next cumulative ack
                continue
            events.append(event)
        return events

    def commit(self, events: Sequence[Event], *, defer: bool = False) -> None:
        """Cumulative ack of the latest of `events` (and of skipped ones), never reaching a
        rolled-back event; deferred, it rides along with the next read."""
        candidates = [e.id for e in events]
        if self._skipped is not None:
            candidates.append(self._skipped)
        allowed = [i for i in candidates if self._limit is None or ids.key(i) < self._limit]
        if not allowed:
            return
        upto = max(allowed, key=ids.key)
        if defer:
            self._deferred = upto
            if self._skipped is not None and ids.key(self._skipped) <= ids.key(upto):
                self._skipped = None
        else:
            self._ack_upto(upto)

    def ack(self, event: Event, outstanding: list[Event]) -> list[Event]:
        upto = ids.key(event.id)
        self._ack_upto(event.id)
        if self._limit is not None and self._limit <= upto:
            self._limit = None  # an explicit cumulative ack went past the rolled-back event
        return [e for e in outstanding if ids.key(e.id) > upto]

    def _ack_upto(self, event_id: str) -> None:
        if self._deferred is not None and ids.key(self._deferred) > ids.key(event_id):
            event_id = self._deferred  # a deferred ack that never went out goes now
        self._deferred = None
        if self._skipped is not None and ids.key(self._skipped) <= ids.key(event_id):
            self._skipped = None
        with server_errors(self._context):
            self.client.scripts.ack_exclusive(
                keys=[self._stream, self._lease, self._counts_key, self._keep],
                args=[self.durable.name, self.token, self.client.lease_ms, event_id],
            )
        self.client.maybe_housekeep(self.durable.channel.name)

    def rollback(self, events: Sequence[Event], delay_s: float = 0.0) -> None:
        """Seed 003: the events come back at the next subscription (a delay cannot apply)."""
        if not events:
            return
        with server_errors(self._context):
            self.client.redis.sadd(self._keep, *(e.id for e in events))
        first = min(ids.key(e.id) for e in events)
        self._limit = first if self._limit is None else min(self._limit, first)

    def release(self, unhanded: Sequence[Event]) -> None:
        self.client.heartbeat.remove(self.token)
        if self._deferred is not None:
            self._ack_upto(self._deferred)
        with server_errors(self._context):
            self.client.scripts.release_exclusive(
                keys=[self._lease, self._keep], args=[self.token, *(e.id for e in unhanded)]
            )
