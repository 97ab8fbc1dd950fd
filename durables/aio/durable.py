"""Asyncio durables: the same spec, checks and depth arithmetic as `durables.durable`,
with the round trips awaited and asyncio consumers and subscriptions."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import dead_letters, names
from ..durable import check_prefetch, check_stored, check_window, new_spec, subscription_window
from ..errors import DurableNotFound
from ..ops import durables as ops
from ..records import DeadLetter, DurableInfo, DurableSpec, Kind
from ..selector import Selector, compile_filter
from .consumer import AsyncConsumer, AsyncListener, AsyncSubscription
from .readers import AsyncExclusiveReader, AsyncReader, AsyncSharedReader

if TYPE_CHECKING:
    from ..keys import ChannelKeys
    from .context import AsyncContext


async def create_durable(
    ctx: AsyncContext,
    k: ChannelKeys,
    name: str,
    kind: str,
    start: str,
    filter: str | None,
    max_deliveries: int | None = None,
) -> AsyncDurable:
    """Get or create; the stored spec wins, and must agree on kind and filter."""
    spec, selector, create = new_spec(k, name, kind, start, filter, max_deliveries)
    stored = await ctx.executor.run(create)
    check_stored(k, name, stored, spec)
    return AsyncDurable(ctx, k, name, stored, selector)


async def load_durable(ctx: AsyncContext, k: ChannelKeys, name: str) -> AsyncDurable:
    spec = await ctx.executor.run(ops.load_spec(k, name))
    if spec is None:
        raise DurableNotFound(f"durable {name!r} does not exist on channel {k.channel!r}")
    return AsyncDurable(ctx, k, name, spec, compile_filter(spec.filter))


class AsyncDurable:
    """A handle on one durable; cheap to make, state lives on the server."""

    def __init__(
        self,
        ctx: AsyncContext,
        k: ChannelKeys,
        name: str,
        spec: DurableSpec,
        selector: Selector | None,
    ) -> None:
        self.ctx = ctx
        self.keys = k
        self.channel_name = k.channel
        self.name = name
        self.spec = spec
        self.selector = selector

    def __repr__(self) -> str:
        return f"Durable({self.channel_name!r}, {self.name!r}, kind={self.kind!r})"

    @property
    def kind(self) -> Kind:
        return self.spec.kind

    async def _group(self) -> dict[str, Any]:
        found = await self.ctx.executor.run(ops.groups(self.keys, self.name))
        group = ops.find_group(found, self.name)
        if group is None:
            raise DurableNotFound(f"durable {self.name!r} does not exist on {self.channel_name!r}")
        return group

    async def depth(self) -> int:
        """Events waiting to be delivered to this durable (matching its filter)."""
        return (await self._depths(await self._group()))[0]

    async def transaction_depth(self) -> int:
        """Events delivered to this durable's consumers and not yet acknowledged."""
        return (await self._depths(await self._group()))[1]

    async def _depths(self, group: dict[str, Any]) -> tuple[int, int]:
        waiting = 0
        if self.kind != "exclusive" and group["pending"]:
            waiting = await self.ctx.executor.run(ops.pool_size(self.keys, self.name))
        if self.selector is None and group.get("lag") is not None:
            new = int(group["lag"])
        else:
            new = await self._count_after(group["last-delivered-id"].decode())
        return new + waiting, int(group["pending"]) - waiting

    async def _count_after(self, position: str) -> int:
        tree = json.dumps(self.selector.to_json() if self.selector else ["lit", True])
        count = 0
        while position:
            found, position = await self.ctx.executor.run(
                ops.count_matching(self.keys, self.name, tree, position)
            )
            count += found
        return count

    async def info(self) -> DurableInfo:
        group = await self._group()
        depth, transaction_depth = await self._depths(group)
        if self.kind == "exclusive":
            consumers = await self.ctx.executor.run(ops.holder(self.keys, self.name))
        else:
            consumers = await self.ctx.executor.run(ops.members(self.keys, self.name))
        return DurableInfo(
            channel=self.channel_name, name=self.name, kind=self.kind, filter=self.spec.filter,
            start=self.spec.start, depth=depth, transaction_depth=transaction_depth,
            last_delivered_id=group["last-delivered-id"].decode(), consumers=tuple(consumers),
        )  # fmt: skip

    async def dead_letters(self, count: int | None = None) -> list[DeadLetter]:
        return await self.ctx.executor.drive(
            dead_letters.dead_letters(self.ctx, self.keys, self.name, count)
        )

    async def replay_dead_letters(self, count: int | None = None) -> int:
        return await self.ctx.executor.drive(
            dead_letters.replay(self.ctx, self.keys, self.name, count)
        )

    async def delete(self) -> bool:
        return await self.ctx.executor.run(ops.delete(self.keys, self.name))

    def consumer(
        self,
        name: str | None = None,
        *,
        prefetch: int | None = None,
        auto_ack: bool | None = None,
        filter: str | None = None,
        on_notice: Callable[[str], object] | None = None,
    ) -> AsyncConsumer:
        """A consumer: `async with durable.consumer(...) as c`, or `c = await durable.consumer()`
        (then `await c.close()`). Attached from then until closed."""
        check_prefetch(self.kind, self.name, prefetch)
        return self._consumer(name, prefetch, auto_ack, filter, on_notice)

    def _consumer(
        self,
        name: str | None,
        window: int | None,
        auto_ack: bool | None,
        filter: str | None = None,
        on_notice: Callable[[str], object] | None = None,
    ) -> AsyncConsumer:
        check_window(self.kind, self.name, window)
        consumer_name = names.consumer_name(name) if name is not None else "consumer"
        if auto_ack is None:
            auto_ack = window is None
        own = compile_filter(filter)
        reader: AsyncReader
        if self.kind == "exclusive":
            selectors = [s for s in (self.selector, own) if s is not None]
            reader = AsyncExclusiveReader(self.ctx, self.keys, self.name, consumer_name,
                                          selectors)  # fmt: skip
        else:
            size = window or self.ctx.settings.client_queue_window
            reader = AsyncSharedReader(self.ctx, self.keys, self.name, self.kind, consumer_name,
                                       size, own, on_notice)  # fmt: skip
        return AsyncConsumer(reader, auto_ack=auto_ack, label=repr(self),
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
    ) -> AsyncSubscription:
        """Deliver events to `listener(event)` (sync or async) from a task until `close()`."""
        window = subscription_window(self.kind, self.name, window,
                                     self.ctx.settings.client_queue_window)  # fmt: skip
        consumer = await self._consumer(name, window, auto_ack, filter, on_notice).attach()
        return AsyncSubscription(consumer, listener, self.ctx.runtime).start()


__all__ = ["AsyncDurable", "create_durable", "load_durable"]
