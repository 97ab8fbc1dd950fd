"""What both clients' consumers (`Consumer`, `AsyncConsumer`) share: the fetch loop, a read
through their reader (`base.Reader`) with auto-ack sent along with it, written once as a
flow (`ops.flows`) that each client drives with its executor; and the bookkeeping of what
they handed out, changed with the reader's state under its lock. Each consumer then sends
the operations that returns, outside the lock: blocking, or awaited."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConfigError, ConnectionLostError, ConsumerClosedError
from ..ops.flows import Flow

if TYPE_CHECKING:
    from ..events import Event
    from ..ops.base import Op
    from .base import Reader


class Flusher(Protocol):
    """Sends a consumer's deferred acknowledgements within `interval_s`
    (`ack_flush_interval_s`; `io.runtime.AckFlusher`, `io.aio.runtime.AsyncAckFlusher`)."""

    interval_s: float

    def schedule(self, owner: Any) -> None: ...

    def cancel(self, owner: Any) -> None: ...


MAX_TIMEOUT_S = 86_400.0


def check_timeout(timeout: float) -> None:
    """`ConfigError` for a fetch timeout that is not a number of seconds from 0 to a day."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 <= timeout <= MAX_TIMEOUT_S
    ):
        raise ConfigError(
            f"fetch timeout must be a number of seconds from 0 to {MAX_TIMEOUT_S:g}, "
            f"got {timeout!r}"
        )


def time_left(timeout: float, started: float) -> float:
    """What is left of a fetch's `timeout` begun at `started` (monotonic seconds), after
    waiting for its turn (`Consumer.fetch`: fetches of one consumer take turns)."""
    return max(0.0, timeout - (time.monotonic() - started))


class Fetching(ABC):
    """What both clients' consumers share: the fetch loop, what it handed out, and what
    acknowledging and rolling back change (`_commit_ops`, `_ack_ops`, `_rollback_ops`: the
    operations to send once the lock is released). Each consumer sends them its own way:
    blocking (in the order its threads send them: exclusive acknowledgements are
    cumulative and a late one acknowledges nothing new, shared ones name their events), or
    awaited one after the other."""

    reader: Reader[Any]

    def __init__(
        self,
        reader: Reader[Any],
        *,
        auto_ack: bool,
        label: str,
        block_s: float,
        acks: Flusher | None = None,
    ) -> None:
        self.reader = reader
        self.auto_ack = auto_ack
        self.label = label
        """What it consumes, for messages and thread names: `Durable('orders', 'billing')`."""
        self.block_s = block_s
        """Longest single wait when iterating, so closing takes effect promptly."""
        self._acks = acks if acks is not None and acks.interval_s > 0 else None
        """With `ack_flush_interval_s`: acknowledgements wait for the next read or the flusher."""
        self._outstanding: list[Event] = []
        """Fetched, and not yet acknowledged or rolled back; guarded by the reader's lock (a
        listener may acknowledge on another thread while this one fetches)."""
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @abstractmethod
    def ack_event(self, event: Event) -> Any:
        """Acknowledge one event (awaitable on the asyncio client)."""

    @abstractmethod
    def rollback_event(self, event: Event, delay_s: float = 0.0) -> Any:
        """Hand one event back for redelivery (awaitable on the asyncio client)."""

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

    def _fetch_begins(self, timeout: float) -> float:
        """A fetch's `timeout` checked and the consumer open (before it waits for its
        turn): when it began (monotonic seconds), for `time_left`."""
        check_timeout(timeout)
        self._check_open()
        return time.monotonic()

    def fetching(self, timeout: float) -> Flow[list[Event]]:
        """The next events (waiting up to `timeout` seconds, checked by `_fetch_begins`);
        [] if none came. With auto-ack, the events of the previous fetch are acknowledged
        first (with the read)."""
        self._check_open()  # again: it may have closed while this fetch waited its turn
        reader = self.reader
        if self.auto_ack and self._outstanding:
            yield from reader.sending(self._commit_ops(defer=True))  # goes with the read
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            events = yield from reader.reading(max(0.0, deadline - time.monotonic()))
            if self._closed or reader.closing:
                return []  # closed by another thread (or task) meanwhile: its events come again
            if events:
                for event in events:
                    event.owner = self
                with reader.lock:
                    self._outstanding.extend(events)
                return events
            if not self._outstanding:
                with suppress(ConnectionLostError):  # the next fetch tries again
                    # lets go of events the filter skipped
                    yield from reader.sending(reader.commit_ops(()), retry=False)
            if time.monotonic() >= deadline:
                return []

    # What acknowledging and rolling back change, at once and under the reader's lock: the
    # reader's state and what is outstanding, together. The operations returned go out
    # after it (`reader.sending`), driven or awaited by the consumer.

    def _commit_ops(self, *, defer: bool) -> list[Op[Any]]:
        """Everything outstanding acknowledged."""
        with self.reader.lock:
            ops = self.reader.commit_ops(self._outstanding, defer=defer)
            self._outstanding = []
        return ops

    def _ack_ops(self, event: Event) -> list[Op[Any]]:
        """`event` acknowledged (exclusive: and all before it)."""
        with self.reader.lock:
            ops, self._outstanding = self.reader.ack_ops(
                event, self._outstanding, defer=self._acks is not None
            )
        return ops

    def _rollback_ops(self, events: Sequence[Event] | None, delay_s: float = 0.0) -> list[Op[Any]]:
        """`events` (None: everything outstanding) handed back."""
        with self.reader.lock:
            back = list(self._outstanding) if events is None else events
            ops = self.reader.rollback_ops(back, delay_s)
            gone = {id(event) for event in back}
            self._outstanding = [e for e in self._outstanding if id(e) not in gone]
        return ops

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError(f"{self!r} is closed")

    def _deferred(self) -> None:
        """Deferred acknowledgements go within the flush interval, if no read carries them."""
        if self._acks is not None:
            self._acks.schedule(self)


def idle_seconds(idle_timeout: object) -> float | None:
    """An iteration's `idle_timeout` as seconds (None: no limit); `ConfigError` otherwise."""
    if idle_timeout is not None and (
        not isinstance(idle_timeout, int | float)
        or isinstance(idle_timeout, bool)
        or not idle_timeout >= 0
    ):
        raise ConfigError(f"idle_timeout must be seconds >= 0 or None, got {idle_timeout!r}")
    return None if idle_timeout is None else float(idle_timeout)


__all__ = ["Fetching", "Flusher", "check_timeout", "idle_seconds", "time_left"]
