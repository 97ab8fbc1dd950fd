"""The synchronous reader of an exclusive durable: one consumer at a time (a lease), in
order, cumulative ack. The read loop is `reading.ExclusiveLoop` (shared with the asyncio
client) and the state `ops.exclusive.ExclusiveCursor`; this class drives them, blocking.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .reading import ExclusiveLoop

if TYPE_CHECKING:
    from .context import Context
    from .events import Event
    from .keys import ChannelKeys
    from .selector import Selector


class ExclusiveReader(ExclusiveLoop):
    """The server side of the one consumer attached to an exclusive durable."""

    lock: threading.RLock

    def __init__(
        self, ctx: Context, k: ChannelKeys, durable: str, name: str, selectors: list[Selector]
    ) -> None:
        self.lock = threading.RLock()
        """Guards the cursor: a listener may ack on another thread while this one reads."""
        super().__init__(ctx, k, durable, name, selectors, self.lock)
        self.executor = ctx.executor

    def attach(self) -> None:
        self.executor.drive(self.attaching())

    def read(self, timeout: float) -> list[Event]:
        return self.executor.drive(self.reading(timeout))

    def commit(self, events: Sequence[Event], *, defer: bool = False, retry: bool = True) -> None:
        self.executor.drive(self.committing(events, defer=defer, retry=retry))

    def ack(self, event: Event, outstanding: list[Event], *, defer: bool = False) -> list[Event]:
        with self.lock:
            op, left = self.state.ack(event, outstanding, defer=defer)
        if op is not None:
            self.executor.drive(self.sending([op]))
        return left

    def flush_acks(self) -> None:
        with self.lock:
            op = self.state.flush()
        if op is not None:
            self.executor.drive(self.sending([op]))

    def rollback(self, events: Sequence[Event], delay_s: float = 0.0) -> None:
        with self.lock:
            op = self.state.rollback(events)
        if op is not None:
            self.executor.drive(self.sending([op]))

    def release(self, unhanded: Sequence[Event]) -> None:
        self.executor.drive(self.releasing(unhanded))
