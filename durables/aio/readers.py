"""The asyncio readers: exclusive (a lease, cumulative ack) and shared/serial (dealt by the
Lua dispatcher). What to send and what a reply means is decided by the same state
machines as the sync readers (`ops.exclusive.ExclusiveCursor`, `ops.shared.SharedHandout`);
and the read loops (wait, attach again after an outage) are the sync readers' too
(`reading.ExclusiveLoop`, `reading.SharedLoop`): these classes await what they ask for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Protocol

from ..fetching import FetchReader
from ..reading import ExclusiveLoop, SharedLoop

if TYPE_CHECKING:
    from ..events import Event
    from ..io.aio.context import AsyncContext
    from ..io.aio.executor import AsyncExecutor
    from ..keys import ChannelKeys
    from ..ops.base import Op
    from ..selector import Selector


class AsyncReader(FetchReader, Protocol):
    """The server side of one attached asyncio consumer (see `durables.consumer.Reader`);
    the fetch loop's part (`lock`, `reading`, `committing`) is `fetching.FetchReader`."""

    stops_on_error: bool
    notices: list[str]
    executor: AsyncExecutor
    lost_acks: int

    @property
    def discarded(self) -> int: ...

    async def attach(self) -> None: ...

    async def read(self, timeout: float) -> list[Event]: ...

    async def commit(
        self, events: Sequence[Event], *, defer: bool = False, retry: bool = True
    ) -> None: ...

    def ack_ops(
        self, event: Event, outstanding: list[Event], *, defer: bool = False
    ) -> tuple[list[Op[Any]], list[Event]]:
        """The state changes at once; the operations to send (none when `defer`red to the
        next read), and what stays outstanding (`reading.ReaderLoop.ack_ops`)."""

    def flush_ops(self) -> list[Op[Any]]:
        """The deferred acknowledgements, to send now."""

    def rollback_ops(self, events: Sequence[Event], delay_s: float = 0.0) -> list[Op[Any]]: ...

    async def send(self, ops: Sequence[Op[Any]]) -> None:
        """Send acks or rollbacks `ack_ops`/`rollback_ops` asked for."""

    async def release(self, unhanded: Sequence[Event]) -> None: ...


class AsyncExclusiveReader(ExclusiveLoop):
    """The one consumer attached to an exclusive durable."""

    def __init__(
        self, ctx: AsyncContext, k: ChannelKeys, durable: str, name: str,
        selectors: list[Selector],
    ) -> None:  # fmt: skip
        super().__init__(ctx, k, durable, name, selectors, nullcontext())
        self.executor = ctx.executor

    async def attach(self) -> None:
        await self.executor.drive(self.attaching())

    async def read(self, timeout: float) -> list[Event]:
        return await self.executor.drive(self.reading(timeout))

    async def commit(
        self, events: Sequence[Event], *, defer: bool = False, retry: bool = True
    ) -> None:
        await self.executor.drive(self.committing(events, defer=defer, retry=retry))

    async def send(self, ops: Sequence[Op[Any]]) -> None:
        await self.executor.drive(self.sending(ops))

    async def release(self, unhanded: Sequence[Event]) -> None:
        await self.executor.drive(self.releasing(unhanded))


class AsyncSharedReader(SharedLoop):
    """One consumer attached to a shared or serial durable."""

    def __init__(
        self,
        ctx: AsyncContext,
        k: ChannelKeys,
        durable: str,
        kind: str,
        name: str,
        window: int,
        selector: Selector | None = None,
        on_notice: Callable[[str], object] | None = None,
    ) -> None:
        super().__init__(ctx, k, durable, kind, name, window, selector, on_notice, nullcontext())
        self.executor = ctx.executor

    async def attach(self, *, retry: bool = True) -> None:
        await self.executor.drive(self.attaching(retry=retry))

    async def read(self, timeout: float) -> list[Event]:
        return await self.executor.drive(self.reading(timeout))

    async def commit(
        self, events: Sequence[Event], *, defer: bool = False, retry: bool = True
    ) -> None:
        await self.executor.drive(self.committing(events, defer=defer, retry=retry))

    async def send(self, ops: Sequence[Op[Any]]) -> None:
        await self.executor.drive(self.sending(ops))

    async def release(self, unhanded: Sequence[Event]) -> None:
        await self.executor.drive(self.releasing(unhanded))


__all__ = ["AsyncExclusiveReader", "AsyncReader", "AsyncSharedReader"]
