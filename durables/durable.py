"""Durables: named, independent, persistent subscriptions on a channel.

Each durable is one consumer group on the channel's stream plus a stored spec
(kind, filter, start) in the channel's `durables` hash.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import dead_letters, ids, names
from .consumer import Consumer, Reader
from .errors import ConfigError, DurableExistsError, DurableNotFound, InvalidWindowError
from .exclusive import ExclusiveReader
from .ops import durables as ops
from .records import KINDS, DeadLetter, DurableInfo, DurableSpec, Kind
from .selector import Selector, compile_filter
from .shared import SharedReader
from .subscription import Subscription

if TYPE_CHECKING:
    from .context import Context
    from .events import Event
    from .keys import ChannelKeys
    from .ops.base import Op

POOL = ops.POOL
SCAN_CHUNK = ops.SCAN_CHUNK


def _group_start(start: str) -> tuple[str, str, str]:
    """(stored start, group start id, id that must exist) for a start option."""
    if start == "earliest":
        return start, "0", ""
    if start == "latest":
        return start, "$", ""
    event_id = ids.normal(start)
    return event_id, ids.previous(event_id), event_id


def create_durable(
    ctx: Context,
    k: ChannelKeys,
    name: str,
    kind: str,
    start: str,
    filter: str | None,
    max_deliveries: int | None = None,
) -> Durable:
    """Get or create; the stored spec wins, and must agree on kind and filter."""
    spec, selector, create = new_spec(k, name, kind, start, filter, max_deliveries)
    stored = ctx.executor.run(create)
    check_stored(k, name, stored, spec)
    return Durable(ctx, k, name, stored, selector)


def new_spec(
    k: ChannelKeys,
    name: str,
    kind: str,
    start: str,
    filter: str | None,
    max_deliveries: int | None,
) -> tuple[DurableSpec, Selector | None, Op[DurableSpec]]:
    """Check the options; the spec to store, its selector and the operation that creates
    the durable (or returns the spec stored before). Shared by the asyncio client."""
    names.durable_name(name)
    if kind not in KINDS:
        raise ConfigError(f"durable kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if max_deliveries is not None and (_not_int(max_deliveries) or max_deliveries < 1):
        raise ConfigError(f"max_deliveries must be a positive int, got {max_deliveries!r}")
    if max_deliveries is not None and kind == "exclusive":
        raise ConfigError(
            "max_deliveries applies to shared and serial durables: an exclusive durable "
            "delivers in order and never sets an event aside"
        )
    selector = compile_filter(filter)
    text = selector.expression if selector else None
    stored_start, group_start, must_exist = _group_start(start)
    spec = DurableSpec(
        kind,  # type: ignore[arg-type]
        text,
        stored_start,
        int(time.time() * 1000),
        max_deliveries,
        selector.to_json() if selector else None,
    )
    return spec, selector, ops.create(k, name, spec, group_start, must_exist)


def check_stored(k: ChannelKeys, name: str, stored: DurableSpec, spec: DurableSpec) -> None:
    """`DurableExistsError` unless the stored durable has the kind and filter asked for."""
    if (stored.kind, stored.filter) != (spec.kind, spec.filter):
        raise DurableExistsError(
            f"durable {name!r} on {k.channel!r} exists as kind={stored.kind!r} "
            f"filter={stored.filter!r}; asked for kind={spec.kind!r} filter={spec.filter!r}"
        )


def load_durable(ctx: Context, k: ChannelKeys, name: str) -> Durable:
    """An existing durable; `DurableNotFound` otherwise."""
    spec = ctx.executor.run(ops.load_spec(k, name))
    if spec is None:
        raise DurableNotFound(f"durable {name!r} does not exist on channel {k.channel!r}")
    return Durable(ctx, k, name, spec, compile_filter(spec.filter))


class Durable:
    """A handle on one durable; cheap to make, state lives on the server."""

    def __init__(
        self, ctx: Context, k: ChannelKeys, name: str, spec: DurableSpec, selector: Selector | None
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

    def _group(self) -> dict[str, Any]:
        group = ops.find_group(self.ctx.executor.run(ops.groups(self.keys, self.name)), self.name)
        if group is None:
            raise DurableNotFound(f"durable {self.name!r} does not exist on {self.channel_name!r}")
        return group

    def depth(self) -> int:
        """Events waiting to be delivered to this durable (matching its filter), including
        events handed back for redelivery."""
        return self._depths(self._group())[0]

    def _depths(self, group: dict[str, Any]) -> tuple[int, int]:
        """(depth, transaction depth) of the durable, from its XINFO GROUPS entry."""
        waiting = 0
        if self.kind != "exclusive" and group["pending"]:
            waiting = self.ctx.executor.run(ops.pool_size(self.keys, self.name))
        if self.selector is None and group.get("lag") is not None:
            new = int(group["lag"])
        else:
            new = self._count_after(group["last-delivered-id"].decode())
        return new + waiting, int(group["pending"]) - waiting

    def _count_after(self, position: str) -> int:
        """Events after `position` that match the filter, counted by the server in slices."""
        tree = json.dumps(self.selector.to_json() if self.selector else ["lit", True])
        count = 0
        while position:
            found, position = self.ctx.executor.run(
                ops.count_matching(self.keys, self.name, tree, position)
            )
            count += found
        return count

    def transaction_depth(self) -> int:
        """Events delivered to this durable's consumers and not yet acknowledged."""
        return self._depths(self._group())[1]

    def info(self) -> DurableInfo:
        group = self._group()
        depth, transaction_depth = self._depths(group)
        return DurableInfo(
            channel=self.channel_name,
            name=self.name,
            kind=self.kind,
            filter=self.spec.filter,
            start=self.spec.start,
            depth=depth,
            transaction_depth=transaction_depth,
            last_delivered_id=group["last-delivered-id"].decode(),
            consumers=tuple(self._consumers()),
        )

    def _consumers(self) -> list[str]:
        if self.kind == "exclusive":
            return self.ctx.executor.run(ops.holder(self.keys, self.name))
        return self.ctx.executor.run(ops.members(self.keys, self.name))

    def dead_letters(self, count: int | None = None) -> list[DeadLetter]:
        """Events given up on after `max_deliveries`, oldest first."""
        return self.ctx.executor.drive(
            dead_letters.dead_letters(self.ctx, self.keys, self.name, count)
        )

    def replay_dead_letters(self, count: int | None = None) -> int:
        """Publish dead letters to the channel again as new events; returns how many."""
        return self.ctx.executor.drive(dead_letters.replay(self.ctx, self.keys, self.name, count))

    def delete(self) -> bool:
        """Delete the durable; its events stay on the channel for the other durables."""
        return self.ctx.executor.run(ops.delete(self.keys, self.name))

    def consumer(
        self,
        name: str | None = None,
        *,
        prefetch: int | None = None,
        auto_ack: bool | None = None,
        filter: str | None = None,
        on_notice: Callable[[str], object] | None = None,
    ) -> Consumer:
        """A synchronous consumer, attached until closed (use it as a context manager).

        `filter` is the consumer's own selector; on a shared or serial durable the latest
        consumer's filter also decides what the durable keeps (seed 004), and consumers
        attached earlier get a notice (`on_notice`, `Consumer.notices`).
        """
        check_prefetch(self.kind, self.name, prefetch)
        return self._attach(name, prefetch, auto_ack, filter, on_notice)

    def _attach(
        self,
        name: str | None,
        window: int | None,
        auto_ack: bool | None,
        filter: str | None = None,
        on_notice: Callable[[str], object] | None = None,
    ) -> Consumer:
        self._check_window(window)
        consumer_name = names.consumer_name(name) if name is not None else "consumer"
        if auto_ack is None:
            auto_ack = window is None  # seed 004: a window means explicit acknowledgement
        own = compile_filter(filter)
        reader: Reader
        if self.kind == "exclusive":
            selectors = [s for s in (self.selector, own) if s is not None]
            reader = ExclusiveReader(self.ctx, self.keys, self.name, consumer_name, selectors)
        else:
            size = window or self.ctx.settings.client_queue_window
            reader = SharedReader(self.ctx, self.keys, self.name, self.kind, consumer_name,
                                  size, own, on_notice)  # fmt: skip
        return Consumer(reader, auto_ack=auto_ack, label=repr(self),
                        block_s=self.ctx.settings.block_s, acks=self.ctx.runtime.acks)  # fmt: skip

    def subscribe(
        self,
        listener: Callable[[Event], object],
        *,
        window: int | None = None,
        auto_ack: bool | None = None,
        name: str | None = None,
        filter: str | None = None,
        on_notice: Callable[[str], object] | None = None,
    ) -> Subscription:
        """Deliver events to `listener(event)` on a background thread until `close()`."""
        window = subscription_window(self.kind, self.name, window,
                                     self.ctx.settings.client_queue_window)  # fmt: skip
        consumer = self._attach(name, window, auto_ack, filter, on_notice)
        return Subscription(consumer, listener, self.ctx.runtime)

    def _check_window(self, size: int | None) -> None:
        check_window(self.kind, self.name, size)


def check_window(kind: str, name: str, size: int | None) -> None:
    """`InvalidWindowError` for a window or prefetch on an exclusive durable."""
    if size is not None and kind == "exclusive":
        raise InvalidWindowError(
            f"a window or prefetch applies to shared and serial durables only; "
            f"{name!r} is exclusive (one consumer, cumulative ack)"
        )


def check_prefetch(kind: str, name: str, prefetch: int | None) -> None:
    """`InvalidWindowError` for a prefetch a consumer cannot take."""
    check_window(kind, name, prefetch)
    if prefetch is not None and (_not_int(prefetch) or prefetch <= 0):
        raise InvalidWindowError(f"prefetch must be a positive int, got {prefetch!r}")


def subscription_window(kind: str, name: str, window: int | None, default: int) -> int | None:
    """The window a subscription gets: `InvalidWindowError` for one it cannot take, and
    a negative one is the default (seed 004)."""
    check_window(kind, name, window)
    if window is not None and (_not_int(window) or window == 0):
        raise InvalidWindowError(f"window must be a positive int, got {window!r}")
    if window is not None and window < 0 and kind != "exclusive":
        return default
    return window


def _not_int(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool)


__all__ = ["POOL", "Durable", "DurableInfo", "DurableSpec", "Kind", "create_durable",
           "load_durable"]  # fmt: skip
