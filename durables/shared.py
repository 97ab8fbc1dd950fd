"""Shared and serial durables: many consumers, events dealt by a Lua dispatcher.

Each fetch is one round trip: a pipeline of the dispatcher script (`fetch_shared.lua`,
which also carries the acks of the previous batch) and a read of the caller's own
pending events (`XREADGROUP ... 0`), so payloads never pass through Lua. Events
already handed out and not yet acknowledged are remembered here, so re-reading the
pending list hands each event out once.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from redis.exceptions import ResponseError

from .events import Event, event_from_entry
from .leases import Lease, LeaseHolder
from .replies import entries_read, raw, server_errors, translate
from .scripts import pipelined

if TYPE_CHECKING:
    from redis.commands.core import Script

    from .durable import Durable
    from .selector import Selector

log = logging.getLogger(__name__)


class SharedReader(LeaseHolder):
    """The server side of one consumer attached to a shared or serial durable."""

    stops_on_error = False

    def __init__(
        self,
        durable: Durable,
        name: str,
        window: int,
        selector: Selector | None = None,
        on_notice: Callable[[str], object] | None = None,
    ) -> None:
        self.durable = durable
        self.client = durable.client
        self.window = window
        self.selector = selector
        self.notices: list[str] = []
        """Asynchronous notices from the durable (seed 004: another consumer's filter took over)."""
        self._on_notice = on_notice
        self._store_version = 0
        self.id = f"{name}#{secrets.token_hex(4)}"
        k, d = durable.channel.keys, durable.name
        self._stream = k.stream
        self._members, self._alive, self._ring = k.members(d), k.alive(d), k.ring(d)
        self._redo, self._delayed, self._counts = k.redo(d), k.delayed(d), k.redeliveries(d)
        self._bell = k.bell(d)
        self._fetch_keys = [
            k.stream, k.durables, self._members, self._alive, self._ring, self._redo,
            self._delayed, self._counts, self._bell, k.dead(d),
        ]  # fmt: skip
        self._handed: set[str] = set()  # handed to the application, not yet acked
        self._to_ack: list[str] = []  # deferred acks, sent with the next fetch
        self._lock = threading.Lock()
        self._context = f"{durable.kind} durable {d!r} on {durable.channel.name!r}"

    def attach(self) -> None:
        with server_errors(self._context):
            tree = json.dumps(self.selector.to_json()) if self.selector else ""
            self._store_version = self.client.scripts.attach_shared(
                keys=[self.durable.channel.keys.durables, self._members, self._alive, self._ring],
                args=[self.durable.name, self.id, self.window, self.client.lease_ms, tree],
            )
        self.client.heartbeat.add(Lease(self.id, self._renew, self._on_lost))

    def _renew(self) -> bool:
        held = self.client.scripts.renew_member(
            keys=[self._members, self._alive], args=[self.id, self.client.lease_ms]
        )
        return bool(held)

    def read(self, timeout: float) -> list[Event]:
        self._check_lease()
        deadline = time.monotonic() + timeout
        while True:
            newest, rung, entries, counts = self._fetch()
            events = self._events(entries, counts)
            remaining = deadline - time.monotonic()
            if events or remaining <= 0:
                return events
            self._wait(newest, rung, min(remaining, self.client.settings.block_s))

    def _fetch(self) -> tuple[str, str, list[Any], dict[str, int]]:
        with self._lock:
            acks, self._to_ack = self._to_ack, []
        script = self.client.scripts.fetch_shared
        args = [self.durable.name, self.id, self.client.lease_ms, *acks]
        try:
            with server_errors(self._context):
                reply, entries = self._pipeline(script, args)
        except BaseException:
            with self._lock:
                self._to_ack[:0] = acks  # not sent: keep them for the next try
            raise
        newest, rung, flat, _buried, version, by = reply
        if self.selector is not None and version > self._store_version and by.decode() != self.id:
            self._store_version = version
            self._notice(
                f"consumer {by.decode()} attached with a filter of its own: from now on the "
                f"durable keeps only events that filter matches; this consumer still takes "
                f"events by its own filter ({self.selector.expression})"
            )
        counts = {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}
        return newest.decode(), rung.decode(), entries, counts

    def _notice(self, text: str) -> None:
        log.warning("%s: %s", self._context, text)
        self.notices.append(text)
        if self._on_notice is not None:
            self._on_notice(text)

    def _pipeline(self, script: Script, args: list[Any]) -> tuple[Any, list[Any]]:
        """The dispatcher, then the caller's own pending events: one round trip."""
        read = ("XREADGROUP", "GROUP", self.durable.name, self.id, "COUNT", self.window,
                "STREAMS", self._stream, "0")  # fmt: skip
        reply, got = pipelined(self.client.redis, script, self._fetch_keys, args, read)
        for answer in (reply, got):
            if isinstance(answer, ResponseError):
                raise translate(answer, self._context)
        return reply, entries_read(got)

    def _events(self, entries: Sequence[Any], counts: dict[str, int]) -> list[Event]:
        channel, events = self.durable.channel.name, []
        with self._lock:
            for entry in entries:
                event = event_from_entry(channel, entry, counts)
                if event is None:  # trimmed while pending: nothing to deliver
                    self._to_ack.append(entry[0].decode())
                elif event.id not in self._handed:
                    self._handed.add(event.id)
                    events.append(event)
        return events

    def _wait(self, newest: str, rung: str, seconds: float) -> None:
        with server_errors(self._context):
            raw(
                self.client.redis, "XREAD", "COUNT", 1, "BLOCK", max(1, int(seconds * 1000)),
                "STREAMS", self._stream, self._bell, newest, rung,
            )  # fmt: skip

    def commit(self, events: Sequence[Event], *, defer: bool = False) -> None:
        if not events:
            return
        ids = [e.id for e in events]
        with self._lock:
            self._handed.difference_update(ids)
            self._to_ack.extend(ids)
        if not defer:
            self._flush_acks()

    def _flush_acks(self) -> None:
        with self._lock:
            acks, self._to_ack = self._to_ack, []
        if not acks:
            return
        pipe = self.client.redis.pipeline(transaction=False)
        pipe.xack(self._stream, self.durable.name, *acks)
        pipe.hdel(self._counts, *acks)
        pipe.xadd(self._bell, {"a": 1}, maxlen=1)  # window room: wake the dispatcher's waiters
        with server_errors(self._context):
            pipe.execute()
        self.client.maybe_housekeep(self.durable.channel.name)

    def ack(self, event: Event, outstanding: list[Event]) -> list[Event]:
        self.commit([event])
        return [e for e in outstanding if e is not event]

    def rollback(self, events: Sequence[Event], delay_s: float = 0.0) -> None:
        if not events:
            return
        ids = [e.id for e in events]
        with self._lock:
            self._handed.difference_update(ids)
        with server_errors(self._context):
            self.client.scripts.rollback_shared(
                keys=[self._stream, self._redo, self._delayed, self._counts, self._bell],
                args=[self.durable.name, self.id, int(delay_s * 1000), *ids],
            )

    def release(self, unhanded: Sequence[Event]) -> None:
        self.client.heartbeat.remove(self.id)
        self._flush_acks()
        with self._lock:
            handed = sorted(self._handed.difference(e.id for e in unhanded))
            self._handed.clear()
        with server_errors(self._context):
            self.client.scripts.release_shared(
                keys=[self._stream, self._members, self._alive, self._ring, self._redo,
                      self._counts, self._bell],
                args=[self.durable.name, self.id, *handed],
            )  # fmt: skip
