"""The synchronous reader of a shared or serial durable: many consumers, events dealt by a
Lua dispatcher. The read loop is `reading.SharedLoop` (shared with the asyncio client) and
the state `ops.shared.SharedHandout`; this class drives them, blocking.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .reading import SharedLoop

if TYPE_CHECKING:
    from .context import Context
    from .events import Event
    from .keys import ChannelKeys
    from .selector import Selector


class SharedReader(SharedLoop):
    """The server side of one consumer attached to a shared or serial durable."""

    lock: threading.RLock

    def __init__(
        self,
        ctx: Context,
        k: ChannelKeys,
        durable: str,
        kind: str,
        name: str,
        window: int,
        selector: Selector | None = None,
        on_notice: Callable[[str], object] | None = None,
    ) -> None:
        self.lock = threading.RLock()
        super().__init__(ctx, k, durable, kind, name, window, selector, on_notice, self.lock)
        self.executor = ctx.executor

    def attach(self, *, retry: bool = True) -> None:
        self.executor.drive(self.attaching(retry=retry))

    def read(self, timeout: float) -> list[Event]:
        return self.executor.drive(self.reading(timeout))

    def commit(self, events: Sequence[Event], *, defer: bool = False, retry: bool = True) -> None:
        self.executor.drive(self.committing(events, defer=defer, retry=retry))

    def ack(self, event: Event, outstanding: list[Event], *, defer: bool = False) -> list[Event]:
        self.commit([event], defer=defer)
        return [e for e in outstanding if e is not event]

    def flush_acks(self) -> None:
        self.executor.drive(self.flushing())

    def rollback(self, events: Sequence[Event], delay_s: float = 0.0) -> None:
        with self.lock:
            op = self.state.rollback(events, delay_s)
        if op is not None:
            self.executor.drive(self.sending([op]))

    def release(self, unhanded: Sequence[Event]) -> None:
        self.executor.drive(self.releasing(unhanded))
