"""The fetch loop both clients' consumers share (`Consumer`, `AsyncConsumer`): a read
through their reader (`reading.ReaderLoop`), with auto-ack sent along with it, written once
as a flow (`ops.flows`) that each client drives with its executor."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager, suppress
from typing import TYPE_CHECKING, Any, Protocol

from .errors import ConfigError, ConnectionLostError
from .ops.flows import Flow

if TYPE_CHECKING:
    from .events import Event


class FetchReader(Protocol):
    """What the fetch loop uses of a reader."""

    @property
    def lock(self) -> AbstractContextManager[Any]: ...

    def reading(self, timeout: float) -> Flow[list[Event]]: ...

    def committing(
        self, events: Sequence[Event], *, defer: bool = False, retry: bool = True
    ) -> Flow[None]: ...


MAX_TIMEOUT_S = 86_400.0


def check_timeout(timeout: float) -> None:
    """`ConfigError` for a fetch timeout that is not a number of seconds from 0 to a day."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) \
            or not 0 <= timeout <= MAX_TIMEOUT_S:  # fmt: skip
        raise ConfigError(
            f"fetch timeout must be a number of seconds from 0 to {MAX_TIMEOUT_S:g}, "
            f"got {timeout!r}"
        )


class Fetching(ABC):
    """What both clients' consumers share: the fetch loop and what it hands out."""

    auto_ack: bool
    reader: FetchReader
    _outstanding: list[Event]

    @abstractmethod
    def _check_open(self) -> None:
        """Refuse a closed consumer."""

    @abstractmethod
    def ack_event(self, event: Event) -> Any:
        """Acknowledge one event (awaitable on the asyncio client)."""

    @abstractmethod
    def rollback_event(self, event: Event, delay_s: float = 0.0) -> Any:
        """Hand one event back for redelivery (awaitable on the asyncio client)."""

    def fetching(self, timeout: float) -> Flow[list[Event]]:
        """The next events (waiting up to `timeout` seconds); [] if none came. With
        auto-ack, the events of the previous fetch are acknowledged first (with the read)."""
        self._check_open()
        check_timeout(timeout)
        lock = self.reader.lock  # a listener may ack from another thread
        if self.auto_ack and self._outstanding:
            with lock:
                done = list(self._outstanding)
                self._outstanding.clear()
            yield from self.reader.committing(done, defer=True)  # goes with the read
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            events = yield from self.reader.reading(max(0.0, deadline - time.monotonic()))
            if events:
                for event in events:
                    event.owner = self
                with lock:
                    self._outstanding.extend(events)
                return events
            if not self._outstanding:
                with suppress(ConnectionLostError):  # the next fetch tries again
                    # lets go of events the filter skipped
                    yield from self.reader.committing((), retry=False)
            if time.monotonic() >= deadline:
                return []


def idle_seconds(idle_timeout: object) -> float | None:
    """An iteration's `idle_timeout` as seconds (None: no limit); `ConfigError` otherwise."""
    if idle_timeout is not None and (
        not isinstance(idle_timeout, int | float) or isinstance(idle_timeout, bool)
        or not idle_timeout >= 0
    ):  # fmt: skip
        raise ConfigError(f"idle_timeout must be seconds >= 0 or None, got {idle_timeout!r}")
    return None if idle_timeout is None else float(idle_timeout)


__all__ = ["FetchReader", "Fetching", "idle_seconds"]
