"""The synchronous reader of an exclusive durable: one consumer at a time (a lease), in
order, cumulative ack. The read loop is `reading.ExclusiveLoop` (shared with the asyncio
client) and the state `ops.exclusive.ExclusiveCursor`; this class drives them, blocking.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .reading import ExclusiveLoop, ReaderLoop

if TYPE_CHECKING:
    from .events import Event
    from .io.context import Context
    from .io.executor import Executor
    from .keys import ChannelKeys
    from .ops.base import Op
    from .selector import Selector


class BlockingAcks(ReaderLoop):
    """Acknowledging, flushing and rolling back, blocking: the state change (`ack_ops`,
    ...) and `sending` are the readers' own, shared with the asyncio client."""

    executor: Executor

    def send(self, ops: Sequence[Op[Any]]) -> None:
        """Send what `ack_ops`, `commit_ops`, `flush_ops` or `rollback_ops` made, outside
        the lock: a fetch on another thread goes on meanwhile."""
        self.executor.drive(self.sending(ops))

    def flush_acks(self) -> None:
        self.send(self.flush_ops())


class ExclusiveReader(ExclusiveLoop, BlockingAcks):
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

    def release(self, unhanded: Sequence[Event]) -> None:
        self.executor.drive(self.releasing(unhanded))
