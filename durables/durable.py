"""Durables: named, independent, persistent subscriptions on a channel.

Each durable is one consumer group on the channel's stream plus a stored spec
(kind, filter, start) in the channel's `durables` hash.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from . import ids, names
from .consumer import Consumer, Reader
from .dead_letters import DeadLetter, dead_letters, replay
from .errors import ConfigError, DurableExistsError, DurableNotFound, InvalidWindowError
from .replies import raw, server_errors, text
from .selector import Selector, compile_filter

if TYPE_CHECKING:
    from .channel import Channel
    from .events import Event
    from .subscription import Subscription

Kind = Literal["exclusive", "shared", "serial"]
KINDS: tuple[str, ...] = get_args(Kind)
SCAN_CHUNK = 1000
POOL = "_pool"
"""The dispatcher's pseudo-consumer: events waiting to be dealt (again) are pending under it."""


@dataclass(frozen=True)
class DurableSpec:
    """What defines a durable; stored as JSON beside the consumer group."""

    kind: Kind
    filter: str | None
    start: str
    created_ms: int
    max_deliveries: int | None = None
    """Deliveries after which a rolled-back event goes to the dead letters (shared, serial)."""
    ast: list[object] | None = None
    """The filter's syntax tree, for the dispatcher's Lua evaluator."""

    def to_json(self) -> str:
        return json.dumps(self.__dict__, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: bytes | str) -> DurableSpec:
        return cls(**json.loads(raw))


@dataclass(frozen=True)
class DurableInfo:
    """A durable's state at one moment."""

    channel: str
    name: str
    kind: Kind
    filter: str | None
    start: str
    depth: int
    transaction_depth: int
    last_delivered_id: str
    consumers: tuple[str, ...]


def _group_start(start: str) -> tuple[str, str, str]:
    """(stored start, group start id, id that must exist) for a start option."""
    if start == "earliest":
        return start, "0", ""
    if start == "latest":
        return start, "$", ""
    event_id = ids.normal(start)
    return event_id, ids.previous(event_id), event_id


def create_durable(
    channel: Channel,
    name: str,
    kind: str,
    start: str,
    filter: str | None,
    max_deliveries: int | None = None,
) -> Durable:
    """Get or create; the stored spec wins, and must agree on kind and filter."""
    names.durable_name(name)
    if kind not in KINDS:
        raise ConfigError(f"durable kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if max_deliveries is not None and (_not_int(max_deliveries) or max_deliveries < 1):
        raise ConfigError(f"max_deliveries must be a positive int, got {max_deliveries!r}")
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
    k = channel.keys
    with server_errors(f"durable {name!r} on {channel.name!r}"):
        _, raw = channel.client.scripts.create_durable(
            keys=[k.stream, k.meta, k.durables],
            args=[name, spec.to_json(), group_start, must_exist],
        )
    stored = DurableSpec.from_json(raw)
    if (stored.kind, stored.filter) != (spec.kind, spec.filter):
        raise DurableExistsError(
            f"durable {name!r} on {channel.name!r} exists as kind={stored.kind!r} "
            f"filter={stored.filter!r}; asked for kind={kind!r} filter={text!r}"
        )
    return Durable(channel, name, stored, selector)


class Durable:
    """A handle on one durable; cheap to make, state lives on the server."""

    def __init__(
        self, channel: Channel, name: str, spec: DurableSpec, selector: Selector | None
    ) -> None:
        self.channel = channel
        self.client = channel.client
        self.name = name
        self.spec = spec
        self.selector = selector

    def __repr__(self) -> str:
        return f"Durable({self.channel.name!r}, {self.name!r}, kind={self.kind!r})"

    @classmethod
    def load(cls, channel: Channel, name: str) -> Durable:
        with server_errors(f"durable {name!r} on {channel.name!r}"):
            raw = channel.client.redis.hget(channel.keys.durables, name)
        if raw is None:
            raise DurableNotFound(f"durable {name!r} does not exist on channel {channel.name!r}")
        spec = DurableSpec.from_json(raw)
        return cls(channel, name, spec, compile_filter(spec.filter))

    @property
    def kind(self) -> Kind:
        return self.spec.kind

    def _group(self) -> dict[str, Any]:
        with server_errors(f"durable {self.name!r}"):
            groups = self.client.redis.xinfo_groups(self.channel.keys.stream)
        for group in groups:
            if text(group["name"]) == self.name:
                return group
        raise DurableNotFound(f"durable {self.name!r} does not exist on {self.channel.name!r}")

    def depth(self) -> int:
        """Events waiting to be delivered to this durable (matching its filter), including
        events handed back for redelivery."""
        return self._depths(self._group())[0]

    def _depths(self, group: dict[str, Any]) -> tuple[int, int]:
        """(depth, transaction depth) of the durable, from its XINFO GROUPS entry."""
        waiting = self._pool_size() if self.kind != "exclusive" and group["pending"] else 0
        if self.selector is None and group.get("lag") is not None:
            new = int(group["lag"])
        else:
            new = self._count_after(text(group["last-delivered-id"]))
        return new + waiting, int(group["pending"]) - waiting

    def _pool_size(self) -> int:
        """Events pending under the dispatcher's pool: handed back, waiting to be dealt."""
        with server_errors(f"durable {self.name!r}"):
            summary = raw(self.client.redis, "XPENDING", self.channel.keys.stream, self.name)
        for consumer in summary.get("consumers") or ():
            if text(consumer["name"]) == POOL:
                return int(consumer["pending"])
        return 0

    def _count_after(self, position: str) -> int:
        """Events after `position` that match the filter, counted by the server in slices."""
        tree = json.dumps(self.selector.to_json() if self.selector else ["lit", True])
        count = 0
        while position:
            with server_errors(f"durable {self.name!r}"):
                found, last = self.client.scripts.count_matching(
                    keys=[self.channel.keys.stream], args=[tree, position, SCAN_CHUNK, "count"]
                )
            count += int(found)
            position = text(last)
        return count

    def transaction_depth(self) -> int:
        """Events delivered to this durable's consumers and not yet acknowledged."""
        return self._depths(self._group())[1]

    def info(self) -> DurableInfo:
        group = self._group()
        depth, transaction_depth = self._depths(group)
        return DurableInfo(
            channel=self.channel.name,
            name=self.name,
            kind=self.kind,
            filter=self.spec.filter,
            start=self.spec.start,
            depth=depth,
            transaction_depth=transaction_depth,
            last_delivered_id=text(group["last-delivered-id"]),
            consumers=self._consumers(),
        )

    def _consumers(self) -> tuple[str, ...]:
        keys = self.channel.keys
        with server_errors(f"durable {self.name!r}"):
            if self.kind != "exclusive":
                return tuple(
                    sorted(text(m) for m in self.client.redis.hkeys(keys.members(self.name)))
                )
            holder = self.client.redis.get(keys.lease(self.name))
        return (text(holder),) if holder else ()

    def dead_letters(self, count: int | None = None) -> list[DeadLetter]:
        """Events given up on after `max_deliveries`, oldest first."""
        return dead_letters(self, count)

    def replay_dead_letters(self, count: int | None = None) -> int:
        """Publish dead letters to the channel again as new events; returns how many."""
        return replay(self, count)

    def delete(self) -> bool:
        """Delete the durable; its events stay on the channel for the other durables."""
        k = self.channel.keys
        with server_errors(f"durable {self.name!r}"):
            done = self.client.scripts.delete_durable(
                keys=[k.stream, k.durables, *k.per_durable(self.name)], args=[self.name]
            )
        return bool(done)

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
        self._check_window(prefetch)
        if prefetch is not None and (_not_int(prefetch) or prefetch <= 0):
            raise InvalidWindowError(f"prefetch must be a positive int, got {prefetch!r}")
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
        reader: Reader
        if self.kind == "exclusive":
            from .exclusive import ExclusiveReader

            reader = ExclusiveReader(self, consumer_name, compile_filter(filter))
        else:
            from .shared import SharedReader

            size = window or self.client.settings.client_queue_window
            reader = SharedReader(self, consumer_name, size, compile_filter(filter), on_notice)
        return Consumer(self, reader, auto_ack=auto_ack)

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
        from .subscription import Subscription

        self._check_window(window)
        if window is not None and (_not_int(window) or window == 0):
            raise InvalidWindowError(f"window must be a positive int, got {window!r}")
        if window is not None and window < 0 and self.kind != "exclusive":
            window = self.client.settings.client_queue_window  # seed 004: negative = default
        return Subscription(self._attach(name, window, auto_ack, filter, on_notice), listener)

    def _check_window(self, size: int | None) -> None:
        if size is not None and self.kind == "exclusive":
            raise InvalidWindowError(
                f"a window or prefetch applies to shared and serial durables only; "
                f"{self.name!r} is exclusive (one consumer, cumulative ack)"
            )


def _not_int(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool)


def durable_infos(channel: Channel, durables: Sequence[str]) -> list[DurableInfo]:
    return [Durable.load(channel, name).info() for name in durables]
