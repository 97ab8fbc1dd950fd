"""Asyncio channels: the same encoding, checks and operations as `durables.channel`."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .. import names
from ..channel import DEFAULT_ACK_TIMEOUT_S, _positive, _replicas
from ..errors import ChannelNotFound, PayloadError
from ..events import Message, Properties, ack_op, check_key, encode_event, tombstone
from ..ids import normal
from ..ops import channels as ops
from ..ops import sessions as session_ops
from ..publishing import publish_encoded, publish_flat
from ..records import ChannelInfo, DurableInfo, Kind, Nack
from ..retention import delete_channel, trim_channel
from .durable import AsyncDurable, create_durable, load_durable

if TYPE_CHECKING:
    from .context import AsyncContext


class AsyncChannel:
    """A named stream of events; durables on it are independent subscriptions."""

    def __init__(self, ctx: AsyncContext, name: str) -> None:
        self.ctx = ctx
        self.name = name
        self.keys = ctx.keys(name)

    def __repr__(self) -> str:
        return f"Channel({self.name!r})"

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
        limit = self.ctx.settings.max_payload_bytes
        op = ack_op(ack_timeout) if ack_required else b""
        encoded = encode_event(data, key, properties, limit, op, message_id)
        event_id = (await self.ctx.executor.drive(publish_encoded(
            self.ctx, self.keys, 1, encoded, replicas=_replicas(replicas),
            replica_timeout_s=_positive("replica_timeout", replica_timeout),
        )))[0]  # fmt: skip
        self.ctx.touch(self.name)
        return event_id

    async def publish_many(self, messages: Iterable[Message]) -> list[str]:
        """Append events in order, one round trip per 1,000; a bad one stores none."""
        limit = self.ctx.settings.max_payload_bytes
        flat: list[bytes] = []
        for m in messages:
            if not isinstance(m, Message):
                raise PayloadError(f"publish_many takes durables.Message objects, got {m!r:.60}")
            flat += encode_event(m.data, m.key, m.properties, limit, b"", m.message_id)
        return await self.ctx.executor.drive(publish_flat(self.ctx, self.keys, flat))

    async def remove_key(self, key: str) -> str:
        parts = list(tombstone(check_key(key)))
        return (await self.ctx.executor.drive(publish_encoded(self.ctx, self.keys, 1, parts)))[0]

    async def nacks(self, count: int | None = None) -> list[Nack]:
        return await self.ctx.executor.run(session_ops.nacks(self.keys, count))

    async def last_values(self) -> dict[str, tuple[str, bytes]]:
        values, ids = await self.ctx.executor.run_all(ops.last_values(self.keys))
        return ops.parse_last(values, ids)

    async def info(self) -> ChannelInfo:
        return (await channel_infos(self.ctx, [self.name]))[0]

    async def purge(self, up_to: str | None = None) -> int:
        last = "+" if up_to is None else normal(up_to)
        return await self.ctx.executor.drive(
            trim_channel(self.ctx, self.keys, mode="purge", up_to=last)
        )

    async def delete(self) -> bool:
        return await self.ctx.executor.drive(delete_channel(self.ctx, self.keys))

    async def durable(
        self,
        name: str,
        kind: Kind = "exclusive",
        start: str = "earliest",
        filter: str | None = None,
        max_deliveries: int | None = None,
    ) -> AsyncDurable:
        """Get or create a durable; `DurableExistsError` if it exists with another kind/filter."""
        return await create_durable(self.ctx, self.keys, name, kind, start, filter,
                                    max_deliveries)  # fmt: skip

    async def get_durable(self, name: str) -> AsyncDurable:
        names.durable_name(name)
        return await load_durable(self.ctx, self.keys, name)

    async def durables(self) -> list[DurableInfo]:
        return [await (await load_durable(self.ctx, self.keys, n)).info()
                for n in await self.durable_names()]  # fmt: skip

    async def durable_names(self) -> list[str]:
        return await self.ctx.executor.run(ops.durable_names(self.keys))


async def channel_infos(ctx: AsyncContext, channels: Sequence[str]) -> list[ChannelInfo]:
    replies = await ctx.executor.run_all([op for n in channels for op in ops.info(ctx.keys(n))])
    size = ops.INFO_OPS
    return [ops.parse_info(n, replies[i * size : (i + 1) * size]) for i, n in enumerate(channels)]


async def open_channel(
    ctx: AsyncContext, name: str, options: dict[str, int | str] | None = None
) -> AsyncChannel:
    names.channel_name(name)
    await ctx.executor.run_all(ops.ensure(ctx.keys(name), options or {}, int(time.time() * 1000)))
    return AsyncChannel(ctx, name)


async def get_channel(ctx: AsyncContext, name: str) -> AsyncChannel:
    names.channel_name(name)
    if not await ctx.executor.run(ops.exists(ctx.keys(name))):
        raise ChannelNotFound(f"channel {name!r} does not exist")
    return AsyncChannel(ctx, name)


__all__ = ["AsyncChannel", "channel_infos", "get_channel", "open_channel"]
