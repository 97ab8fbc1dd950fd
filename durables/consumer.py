"""The synchronous consumer: `fetch()` events, then `ack`, `commit` or `rollback`.

What acknowledging means differs by durable kind (cumulative on exclusive durables); that
part lives in the reader (`readers`), one per kind, the same readers the asyncio consumer
uses. This class keeps track of what it handed out (`readers.fetching.Fetching`, shared
with the asyncio consumer) and drives the reader's flows, blocking: the state changes
under the reader's lock, the round trip goes after it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .readers.fetching import Fetching, Flusher, idle_seconds, time_left

if TYPE_CHECKING:
    from .events import Event
    from .io.context import Context
    from .ops.base import Op
    from .readers.base import Reader


class Consumer(Fetching):
    """A consumer attached to a durable from creation until `close()`."""

    reader: Reader[Context]

    def __init__(
        self,
        reader: Reader[Context],
        *,
        auto_ack: bool,
        label: str,
        block_s: float,
        acks: Flusher | None = None,
    ) -> None:
        super().__init__(reader, auto_ack=auto_ack, label=label, block_s=block_s, acks=acks)
        self._executor = reader.ctx.executor
        self._turn = threading.Lock()
        """Held by the fetch under way: fetches from several threads take turns."""
        self._executor.drive(reader.attaching())

    def __repr__(self) -> str:
        return f"Consumer({self.label}, auto_ack={self.auto_ack})"

    def fetch(self, timeout: float = 1.0) -> list[Event]:
        """The next events (waiting up to `timeout` seconds); [] if none came.

        With auto-ack, the events of the previous fetch are acknowledged first. Threads
        that fetch from one consumer take turns: each waits (within its timeout) for the
        fetch under way to return, so every event goes to one of them, once.
        """
        started = self._fetch_begins(timeout)
        if not self._turn.acquire(timeout=timeout):
            return []
        try:
            return self._executor.drive(self.fetching(time_left(timeout, started)))
        finally:
            self._turn.release()

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
        self._send(self._commit_ops(defer=self._acks is not None))
        self._deferred()

    def rollback(self) -> None:
        """Hand back every fetched event not yet acknowledged."""
        self._check_open()
        self._send(self._rollback_ops(None))

    def ack_event(self, event: Event) -> None:
        self._check_open()
        self._send(self._ack_ops(event))
        self._deferred()

    def flush_acks(self) -> None:
        """Send the acknowledgements waiting for the next read (`ack_flush_interval_s`)."""
        if not self._closed:
            self._send(self.reader.flush_ops())

    def rollback_event(self, event: Event, delay_s: float = 0.0) -> None:
        self._check_open()
        self._send(self._rollback_ops([event], delay_s))

    def _send(self, ops: list[Op[Any]], *, retry: bool = True) -> None:
        """What the reader's state change made, sent after it (the lock released)."""
        if ops:
            self._executor.drive(self.reader.sending(ops, retry=retry))

    def close(self, *, clean: bool = True, unhanded: Sequence[Event] = ()) -> None:
        """Detach. A clean close with auto-ack acknowledges what was fetched; `unhanded`
        events were read but never given to the application."""
        if self._closed:
            return
        if self._acks is not None:
            self._acks.cancel(self)  # the release sends the deferred acknowledgements
        try:
            if clean and self.auto_ack and self._outstanding:
                self._send(self._commit_ops(defer=False), retry=False)  # closing waits for nothing
        finally:
            self._closed = True
            self._executor.drive(self.reader.releasing(unhanded))

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(clean=e is None)
