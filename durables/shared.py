"""The synchronous reader of a shared or serial durable: many consumers, events dealt by a
Lua dispatcher. The read loop is `reading.SharedLoop` (shared with the asyncio client) and
the state `ops.shared.SharedHandout`; this class drives them, blocking.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .exclusive import BlockingAcks
from .reading import SharedLoop

if TYPE_CHECKING:
    from .events import Event
    from .io.context import Context
    from .keys import ChannelKeys
    from .selector import Selector


class SharedReader(SharedLoop, BlockingAcks):
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

    def release(self, unhanded: Sequence[Event]) -> None:
        self.executor.drive(self.releasing(unhanded))
