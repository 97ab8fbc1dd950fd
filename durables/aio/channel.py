"""Asyncio channels: `durables.channel.ChannelCore` (the encoding, checks and operations
both clients share) awaited."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .. import names
from ..channel import DEFAULT_ACK_TIMEOUT_S, ChannelCore, finding, opening
from ..durable import creating
from ..events import Event, Message, Properties
from ..records import ChannelInfo, DurableInfo, Kind, Nack
from .durable import AsyncDurable, load_durable

if TYPE_CHECKING:
    from ..io.aio.context import AsyncContext


class AsyncChannel(ChannelCore):
    """A named stream of events; durables on it are independent subscriptions."""

    ctx: AsyncContext

    def __init__(self, ctx: AsyncContext, name: str) -> None:
        super().__init__(ctx, name)
        self.executor = ctx.executor

    async def publish(
        self,
        data: Any,
        key: str | None = None,
        properties: Properties | None = None,
        *,
        message_id: str | None = None,
        ack_required: bool = False,
        ack_timeout: float = DEFAULT_ACK_TIMEOUT_S,
        replicas: int | None = None,
        replica_timeout: float | None = None,
    ) -> str:
        """Append one event; its id once the server stored it (see `Channel.publish`)."""
        event_id = (await self.executor.drive(self.publishing(
            data, key, properties, message_id, ack_required, ack_timeout, replicas,
            replica_timeout,
        )))[0]  # fmt: skip
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

    async def durable(
        self,
        name: str,
        kind: Kind | None = None,
        start: str | None = None,
        filter: str | None = None,
        max_deliveries: int | None = None,
    ) -> AsyncDurable:
        """Get or create a durable: with no kind, the one of that name whatever its kind, else
        a new exclusive one; `start` ('earliest' when None) applies when it is created.
        `DurableExistsError` if it exists with another kind (when given) or filter (compared
        by meaning: `region='eu'` is `region = 'eu'`). With no spec at all (only the name),
        the durable as it is, whatever its kind and filter (a new exclusive one if none)."""
        flow = creating(self.keys, name, kind, start, filter, max_deliveries)
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
