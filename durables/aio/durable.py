"""Asyncio durables: `durables.durable.DurableCore` (the spec, checks and depth
arithmetic both clients share) awaited, with asyncio consumers and subscriptions."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING

from ..durable import DurableCore, check_prefetch, loading, subscription_window
from ..io.leases import Wait, wait_seconds
from ..readers.base import Reader
from ..readers.exclusive.reader import ExclusiveReader
from ..readers.shared.reader import SharedReader
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


class AsyncDurable(DurableCore):
    """A handle on one durable; cheap to make, state lives on the server."""

    ctx: AsyncContext

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

    def consumer(
        self,
        name: str | None = None,
        *,
        prefetch: int | None = None,
        auto_ack: bool | None = None,
        filter: str | None = None,
        on_notice: Callable[[str], object] | None = None,
        replicated: int = 0,
        wait: Wait = False,
    ) -> AsyncConsumer:
        """A consumer: `async with durable.consumer(...) as c`, or `c = await durable.consumer()`
        (then `await c.close()`). Attached from then until closed. `replicated` and `wait`
        (for another holder's lease to lapse) as for the sync client's consumers."""
        check_prefetch(self.kind, self.name, prefetch)
        return self._consumer(name, prefetch, auto_ack, filter, on_notice, replicated, wait)

    def _consumer(
        self,
        name: str | None,
        window: int | None,
        auto_ack: bool | None,
        filter: str | None = None,
        on_notice: Callable[[str], object] | None = None,
        replicated: int = 0,
        wait: Wait = False,
    ) -> AsyncConsumer:
        wait_s = wait_seconds(wait)
        plan = self._plan(name, window, auto_ack, filter, replicated)
        reader: Reader[AsyncContext]
        lock = nullcontext()  # one thread
        if self.kind == "exclusive":
            exclusive = ExclusiveReader(self.ctx, self.keys, self.name, plan.name,
                                        plan.selectors, lock)  # fmt: skip
            exclusive.wait_s = wait_s
            reader = exclusive
        else:
            reader = SharedReader(self.ctx, self.keys, self.name, self.kind, plan.name,
                                  plan.window, plan.own, on_notice, lock)  # fmt: skip
        reader.replicated = plan.replicated
        return AsyncConsumer(reader, auto_ack=plan.auto_ack, label=repr(self),
                             block_s=self.ctx.settings.block_s,
                             acks=self.ctx.runtime.acks)  # fmt: skip

    async def subscribe(
        self,
        listener: AsyncListener,
        *,
        window: int | None = None,
        auto_ack: bool | None = None,
        name: str | None = None,
        filter: str | None = None,
        on_notice: Callable[[str], object] | None = None,
        replicated: int = 0,
        wait: Wait = False,
    ) -> AsyncSubscription:
        """Deliver events to `listener(event)` (sync or async) from a task until `close()`
        (`wait` as for `consumer`)."""
        window = subscription_window(self.kind, self.name, window,
                                     self.ctx.settings.client_queue_window)  # fmt: skip
        consumer = self._consumer(name, window, auto_ack, filter, on_notice, replicated, wait)
        consumer = await consumer.attach()
        return AsyncSubscription(consumer, listener, self.ctx.runtime).start()


__all__ = ["AsyncDurable", "load_durable"]
