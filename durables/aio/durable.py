"""Asyncio durables: `durables.durable.DurableFront` (the spec, checks, depth arithmetic
and the making of consumers both clients share) awaited, with asyncio consumers and
subscriptions."""

from __future__ import annotations

from collections.abc import Coroutine
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from ..durable import DurableFront, loading
from ..records import DeadLetter, DurableInfo, DurableSpec
from ..selector import Selector
from .consumer import AsyncConsumer, AsyncListener, AsyncSubscription

if TYPE_CHECKING:
    from ..events import Event
    from ..io.aio.context import AsyncContext
    from ..keys import ChannelKeys


async def load_durable(ctx: AsyncContext, k: ChannelKeys, name: str) -> AsyncDurable:
    """An existing durable; `DurableNotFoundError` otherwise."""
    return AsyncDurable(ctx, k, name, *await ctx.executor.drive(loading(k, name)))


class AsyncDurable(
    DurableFront[AsyncListener, AsyncConsumer, Coroutine[Any, Any, AsyncSubscription]]
):
    """A handle on one durable; cheap to make, state lives on the server. `consumer()` and
    `subscribe()` as the sync client's (`durables.durable.DurableFront`); `subscribe()`
    is awaited."""

    ctx: AsyncContext
    consumer_type = AsyncConsumer

    def __init__(
        self,
        ctx: AsyncContext,
        k: ChannelKeys,
        name: str,
        spec: DurableSpec,
        selector: Selector | None,
    ) -> None:
        super().__init__(ctx, k, name, spec, selector)
        self.executor = ctx.executor

    async def depth(self) -> int:
        """Events waiting to be delivered to this durable (matching its filter)."""
        return (await self.executor.drive(self.depths()))[0]

    async def transaction_depth(self) -> int:
        """Events delivered to this durable's consumers and not yet acknowledged."""
        return (await self.executor.drive(self.depths()))[1]

    async def info(self) -> DurableInfo:
        return await self.executor.drive(self.describing())

    async def browse(self, count: int = 20) -> list[Event]:
        return await self.executor.drive(self.browsing(count))

    async def dead_letters(self, count: int | None = None) -> list[DeadLetter]:
        return await self.executor.drive(self.reading_dead_letters(count))

    async def replay_dead_letters(self, count: int | None = None) -> int:
        return await self.executor.drive(self.replaying_dead_letters(count))

    async def delete(self) -> bool:
        return await self.executor.drive(self.deleting())

    def _reader_lock(self) -> AbstractContextManager[Any]:
        return nullcontext()  # one thread: state changes never interleave within a step

    def _subscribed(
        self, listener: AsyncListener, consumer: AsyncConsumer
    ) -> Coroutine[Any, Any, AsyncSubscription]:
        return self._subscribing(listener, consumer)

    async def _subscribing(
        self, listener: AsyncListener, consumer: AsyncConsumer
    ) -> AsyncSubscription:
        attached = await consumer.attach()
        return AsyncSubscription(attached, listener, self.ctx.runtime).start()


__all__ = ["AsyncDurable", "load_durable"]
