"""Asyncio channels: `durables.channel.ChannelFront` (the encoding, checks, operations and
front methods' arguments both clients share) awaited."""

from __future__ import annotations

from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Any

from .. import names
from ..channel import ChannelFront, finding, opening
from ..events import Event, Message
from ..ops.flows import Flow
from ..records import ChannelInfo, DurableInfo, DurableSpec, Nack
from ..selector import Selector
from .durable import AsyncDurable, load_durable

if TYPE_CHECKING:
    from ..io.aio.context import AsyncContext


class AsyncChannel(ChannelFront[Coroutine[Any, Any, str], Coroutine[Any, Any, AsyncDurable]]):
    """A named stream of events; durables on it are independent subscriptions.
    `publish()` and `durable()` as the sync client's (`durables.channel.ChannelFront`),
    awaited."""

    ctx: AsyncContext

    def __init__(self, ctx: AsyncContext, name: str) -> None:
        super().__init__(ctx, name)
        self.executor = ctx.executor

    async def _published(self, flow: Flow[list[str]]) -> str:
        event_id = (await self.executor.drive(flow))[0]
        self.ctx.touch(self.name)
        return event_id

    async def publish_many(self, messages: Iterable[Message]) -> list[str]:
        """Append events in order, one round trip per 1,000; a bad one stores none."""
        return await self.executor.drive(self.publishing_many(messages))

    async def remove_key(self, key: str) -> str:
        return (await self.executor.drive(self.removing_key(key)))[0]

    async def browse(self, count: int = 20) -> list[Event]:
        return await self.executor.drive(self.browsing(count))

    async def nacks(self, count: int | None = None) -> list[Nack]:
        return await self.executor.drive(self.reading_nacks(count))

    async def last_values(self) -> dict[str, tuple[str, bytes]]:
        return await self.executor.drive(self.reading_last_values())

    async def info(self) -> ChannelInfo:
        return await self.executor.drive(self.describing())

    async def purge(self, up_to: str | None = None) -> int:
        return await self.executor.drive(self.purging(up_to))

    async def delete(self) -> bool:
        return await self.executor.drive(self.deleting())

    async def _durable(
        self, name: str, flow: Flow[tuple[DurableSpec, Selector | None]]
    ) -> AsyncDurable:
        return AsyncDurable(self.ctx, self.keys, name, *await self.executor.drive(flow))

    async def get_durable(self, name: str) -> AsyncDurable:
        names.durable_name(name)
        return await load_durable(self.ctx, self.keys, name)

    async def durables(self) -> list[DurableInfo]:
        return await self.executor.drive(self.listing_durables())

    async def durable_names(self) -> list[str]:
        return await self.executor.drive(self.naming_durables())


async def open_channel(
    ctx: AsyncContext, name: str, options: dict[str, int | str] | None = None
) -> AsyncChannel:
    await ctx.executor.drive(opening(ctx, name, options))
    return AsyncChannel(ctx, name)


async def get_channel(ctx: AsyncContext, name: str) -> AsyncChannel:
    await ctx.executor.drive(finding(ctx, name))
    return AsyncChannel(ctx, name)


__all__ = ["AsyncChannel", "get_channel", "open_channel"]
