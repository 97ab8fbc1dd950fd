"""The synchronous consumer: `fetch()` events, then `ack`, `commit` or `rollback`.

What acknowledging means differs by durable kind (cumulative on exclusive
durables); that part lives in a `Reader`, one per kind, and this class only
keeps track of what it handed out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from .errors import ConsumerClosedError
from .fetching import Fetching, FetchReader, idle_seconds

if TYPE_CHECKING:
    from .events import Event
    from .io.executor import Executor
    from .io.runtime import AckFlusher
    from .ops.base import Op


class Reader(FetchReader, Protocol):
    """The server side of one attached consumer of one durable kind; the fetch loop's part
    (`lock`, `reading`, `committing`) is `fetching.FetchReader`."""

    stops_on_error: bool
    """An asynchronous listener's failure ends the subscription (exclusive: nothing past a
    rolled-back event may be acknowledged before a re-subscription)."""
    notices: list[str]
    """Asynchronous notices from the durable, such as another consumer's filter taking over."""

    @property
    def discarded(self) -> int:
        """Exact duplicates not handed out again."""

    lost_acks: int
    """Acknowledgements refused for a lease that lapsed in an outage (`reading.ReaderLoop`)."""

    lock: threading.RLock
    """Guards the reader's state and the consumer's outstanding events: one lock per consumer."""

    executor: Executor

    def attach(self) -> None: ...

    def read(self, timeout: float) -> list[Event]: ...

    def commit(self, events: Sequence[Event], *, defer: bool = False, retry: bool = True) -> None:
        """Acknowledge `events`; `defer` lets the reader send it with its next read; without
        `retry` an outage raises at once instead of being waited out."""

    def commit_ops(self, events: Sequence[Event], *, defer: bool = False) -> list[Op[Any]]:
        """The state changes at once (under `lock`); the operations to send (none when
        `defer`red to the next read)."""

    def ack_ops(
        self, event: Event, outstanding: list[Event], *, defer: bool = False
    ) -> tuple[list[Op[Any]], list[Event]]:
        """Acknowledge `event` (and, for an exclusive durable, all before it): the operations
        to send, and what stays outstanding; `defer` as for `commit`."""

    def rollback_ops(self, events: Sequence[Event], delay_s: float = 0.0) -> list[Op[Any]]: ...

    def send(self, ops: Sequence[Op[Any]]) -> None:
        """Send what the `..._ops` methods made (never under `lock`)."""

    def flush_acks(self) -> None:
        """Send the deferred acknowledgements now."""

    def release(self, unhanded: Sequence[Event]) -> None: ...


class Consumer(Fetching):
    """A consumer attached to a durable from creation until `close()`."""

    reader: Reader

    def __init__(
        self,
        reader: Reader,
        *,
        auto_ack: bool,
        label: str,
        block_s: float,
        acks: AckFlusher | None = None,
    ) -> None:
        self.label = label
        """What it consumes, for messages and thread names: `Durable('orders', 'billing')`."""
        self.block_s = block_s
        """Longest single wait when iterating, so closing takes effect promptly."""
        self.auto_ack = auto_ack
        self.reader = reader
        self._executor = reader.executor
        self._acks = acks if acks is not None and acks.interval_s > 0 else None
        """With `ack_flush_interval_s`: acknowledgements wait for the next read or the flusher."""
        self._outstanding: list[Event] = []
        self._lock = reader.lock  # a listener may ack from another thread
        self._closed = False
        reader.attach()

    def __repr__(self) -> str:
        return f"Consumer({self.label}, auto_ack={self.auto_ack})"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def discarded(self) -> int:
        """Exact duplicates this consumer did not hand out again (after a failover or a
        reconnection, or a publish stored twice); bounded memory."""
        return self.reader.discarded

    @property
    def lost_acks(self) -> int:
        """Acknowledgements (and rollbacks) the server refused because this consumer's lease
        had lapsed during an outage: `ack()` and `commit()` return all the same (and log it
        once); the consumer attaches again at its next fetch, and the events come again,
        flagged `redelivered`, unless its acknowledgement went through after all."""
        return self.reader.lost_acks

    @property
    def notices(self) -> list[str]:
        """What the durable told this consumer while attached (the store filter's change)."""
        return self.reader.notices

    def fetch(self, timeout: float = 1.0) -> list[Event]:
        """The next events (waiting up to `timeout` seconds); [] if none came.

        With auto-ack, the events of the previous fetch are acknowledged first.
        """
        return self._executor.drive(self.fetching(timeout))

    def __iter__(self) -> Iterator[Event]:
        """Events one by one, waiting as long as it takes; stop by breaking out or closing
        (`events(idle_timeout=)` also stops when none comes for a while)."""
        return self.events()

    def events(self, idle_timeout: float | None = None) -> Iterator[Event]:
        """Events one by one (`for event in consumer.events(idle_timeout=5)`), until the
        consumer closes or, with `idle_timeout`, no event has come for that many seconds."""
        idle_s = idle_seconds(idle_timeout)
        idle_since = time.monotonic()
        while not self._closed:
            wait = self.block_s if idle_s is None else idle_since + idle_s - time.monotonic()
            if wait <= 0:
                return
            events = self.fetch(timeout=min(wait, self.block_s))
            yield from events
            if events:
                idle_since = time.monotonic()

    def commit(self) -> None:
        """Acknowledge every fetched event not yet acknowledged or rolled back."""
        self._check_open()
        with self._lock:  # the state changes under the lock, the round trip goes outside it
            ops = self.reader.commit_ops(self._outstanding, defer=self._acks is not None)
            self._outstanding.clear()
        self.reader.send(ops)
        self._deferred()

    def rollback(self) -> None:
        """Hand back every fetched event not yet acknowledged."""
        self._check_open()
        with self._lock:
            ops = self.reader.rollback_ops(self._outstanding)
            self._outstanding.clear()
        self.reader.send(ops)

    def ack_event(self, event: Event) -> None:
        self._check_open()
        with self._lock:
            ops, self._outstanding = self.reader.ack_ops(
                event, self._outstanding, defer=self._acks is not None
            )
        self.reader.send(ops)
        self._deferred()

    def _deferred(self) -> None:
        if self._acks is not None:
            self._acks.schedule(self)

    def flush_acks(self) -> None:
        """Send the acknowledgements waiting for the next read (`ack_flush_interval_s`)."""
        if not self._closed:
            self.reader.flush_acks()

    def rollback_event(self, event: Event, delay_s: float = 0.0) -> None:
        self._check_open()
        with self._lock:
            ops = self.reader.rollback_ops([event], delay_s)
            if event in self._outstanding:
                self._outstanding.remove(event)
        self.reader.send(ops)

    def close(self, *, clean: bool = True, unhanded: Sequence[Event] = ()) -> None:
        """Detach. A clean close with auto-ack acknowledges what was fetched; `unhanded`
        events were read but never given to the application."""
        if self._closed:
            return
        if self._acks is not None:
            self._acks.cancel(self)  # the release sends the deferred acknowledgements
        try:
            if clean and self.auto_ack and self._outstanding:
                self.reader.commit(self._outstanding, retry=False)  # closing waits for nothing
        finally:
            self._closed = True
            self.reader.release(unhanded)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(clean=e is None)

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError(f"{self!r} is closed")
