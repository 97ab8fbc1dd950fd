"""A subscription: a listener called with each event on a background thread (Universal
Messaging's asynchronous subscriber; the asyncio client's is `aio.consumer.AsyncSubscription`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

from .errors import DurablesError

if TYPE_CHECKING:
    from .consumer import Consumer
    from .events import Event
    from .io.runtime import Runtime

log = logging.getLogger(__name__)
Listener = Callable[["Event"], object]


class Subscription:
    """Feeds a durable's events to `listener(event)` until `close()`.

    With auto-ack, an event is acknowledged once the listener returns (in batches, at
    least once); a listener that raises rolls its event back. On an exclusive durable
    that also ends the subscription (see `error`): nothing after a rolled-back event
    can be acknowledged until the durable is subscribed again.
    """

    def __init__(
        self, consumer: Consumer, listener: Listener, runtime: Runtime | None = None
    ) -> None:
        self.consumer = consumer
        self.listener = listener
        self.error: BaseException | None = None
        self._runtime = runtime
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"durables-{consumer.label}", daemon=True
        )
        if runtime is not None:
            runtime.own(self)  # the client's close() stops it first
        self._thread.start()

    @property
    def closed(self) -> bool:
        return not self._thread.is_alive()

    def _run(self) -> None:
        unhanded: list[Event] = []
        try:
            while not self._stop.is_set() and self.error is None:
                events = self.consumer.fetch(self.consumer.block_s)
                unhanded = self._deliver(events)
        except DurablesError as exc:
            self.error = exc
            log.error("subscription on %s stopped: %s", self.consumer.label, exc)
        except Exception as exc:  # a bug: said loudly and kept, never a silent dead listener
            self.error = exc
            log.exception("subscription on %s stopped by an unexpected error", self.consumer.label)
        finally:
            try:
                self.consumer.close(unhanded=unhanded)
            except Exception as exc:  # closing is best effort: the lease lapses otherwise
                log.error("closing %r failed: %s", self.consumer, exc)
            if self._runtime is not None:
                self._runtime.disown(self)

    def _deliver(self, events: list[Event]) -> list[Event]:
        """Call the listener per event; returns the events left undelivered when stopping."""
        for i, event in enumerate(events):
            if self._stop.is_set():
                return events[i:]
            try:
                self.listener(event)
            except Exception as exc:
                log.exception("listener failed on event %s; rolling it back", event.id)
                event.rollback()
                if self.consumer.reader.stops_on_error:
                    self.error = exc
                    return events[i + 1 :]
        return []

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the subscription to end; True if it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        """Stop delivering, acknowledge what was processed (auto-ack) and detach."""
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
