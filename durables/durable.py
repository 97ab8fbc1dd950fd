"""Durables: named, independent, persistent subscriptions on a channel.

Each durable is one consumer group on the channel's stream plus a stored spec
(kind, filter, start) in the channel's `durables` hash.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import dead_letters, ids, names
from .consumer import Consumer
from .errors import ConfigError, DurableExistsError, DurableNotFoundError, InvalidWindowError
from .ops import channels as channel_ops
from .ops import durables as ops
from .ops.flows import Flow, run, send
from .options import ConsumerOptions, ReaderOptions, SubscriptionOptions, Wait
from .readers.exclusive.reader import ExclusiveReader
from .readers.shared.reader import SharedReader
from .records import KINDS, DeadLetter, DurableInfo, DurableSpec, Kind
from .selector import Selector, compile_filter
from .subscription import Listener, Subscription

if TYPE_CHECKING:
    from .events import Event
    from .io.context import BaseContext, Context
    from .keys import ChannelKeys
    from .ops.base import Op

POOL = ops.POOL
log = logging.getLogger(__name__)
SCAN_CHUNK = ops.SCAN_CHUNK


def _group_start(start: str) -> tuple[str, str, str]:
    """(stored start, group start id, id that must exist) for a start option."""
    if start == "earliest":
        return start, "0", ""
    if start == "latest":
        return start, "$", ""
    event_id = ids.normal(start)
    return event_id, ids.previous(event_id), event_id


def creating(
    k: ChannelKeys,
    name: str,
    kind: str | None,
    start: str | None,
    filter: str | None,
    max_deliveries: int | None,
) -> Flow[tuple[DurableSpec, Selector | None]]:
    """Create the durable, or find the one stored (its spec wins, and must agree on the
    kind, when one is given, and on the filter's meaning); its spec and selector.

    No kind: the durable of that name whatever its kind, else a new exclusive one. No
    start: from the earliest event when created. A start given for a durable that exists
    with another one cannot move it (it has its own position): a warning says so. No spec
    at all (no kind, start, filter or max_deliveries): a lookup, the durable as it is
    stored, whatever its filter.
    """
    as_is = kind is None and start is None and filter is None and max_deliveries is None
    spec, selector, create = new_spec(
        k,
        name,
        "exclusive" if kind is None else kind,
        "earliest" if start is None else start,
        filter,
        max_deliveries,
    )
    stored = yield from run(create)
    if not as_is:
        check_stored(k, name, stored, spec, kind_given=kind is not None)
    if start is not None and stored.start != spec.start:
        log.warning(
            "durable %r on %r exists with start=%r: start=%r applies only when a durable is "
            "created, so it keeps its position (delete it and create it again to move it)",
            name, k.channel, stored.start, spec.start,
        )  # fmt: skip
    return stored, selector


def loading(k: ChannelKeys, name: str) -> Flow[tuple[DurableSpec, Selector | None]]:
    """An existing durable's spec and selector; `DurableNotFoundError` otherwise."""
    spec = yield from run(ops.load_spec(k, name))
    if spec is None:
        raise DurableNotFoundError(f"durable {name!r} does not exist on channel {k.channel!r}")
    return spec, compile_filter(spec.filter)


def new_spec(
    k: ChannelKeys,
    name: str,
    kind: str,
    start: str,
    filter: str | None,
    max_deliveries: int | None,
) -> tuple[DurableSpec, Selector | None, Op[DurableSpec]]:
    """Check the options; the spec to store, its selector and the operation that creates
    the durable (or returns the spec stored before); the first step of `creating`."""
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


def check_stored(
    k: ChannelKeys, name: str, stored: DurableSpec, spec: DurableSpec, *, kind_given: bool = True
) -> None:
    """`DurableExistsError` unless the stored durable has the kind (if `kind_given`) and the
    filter asked for; filters compare by their parsed form (`region='eu'` is
    `region = 'eu'`)."""
    same_kind = stored.kind == spec.kind or not kind_given
    if not same_kind or _parsed(stored) != _parsed(spec):
        raise DurableExistsError(
            f"durable {name!r} on {k.channel!r} exists as kind={stored.kind!r} "
            f"filter={stored.filter!r}; asked for "
            f"{f'kind={spec.kind!r} ' if kind_given else ''}filter={spec.filter!r}: to use "
            f"it as it is, call get_durable({name!r}) (or durable({name!r}) with no spec)"
        )


def _parsed(spec: DurableSpec) -> str | None:
    """The filter's syntax tree as JSON (compiled from its text for a spec stored without
    one), the form two filters of one meaning share."""
    tree = spec.ast
    if tree is None and spec.filter is not None:
        selector = compile_filter(spec.filter)
        tree = selector.to_json() if selector else None
    return None if tree is None else json.dumps(tree)


def load_durable(ctx: Context, k: ChannelKeys, name: str) -> Durable:
    """An existing durable; `DurableNotFoundError` otherwise."""
    return Durable(ctx, k, name, *ctx.executor.drive(loading(k, name)))


class DurableCore:
    """A handle on one durable, for both clients; cheap to make, state lives on the server.
    What it asks of the server are flows (`ops.flows`) its client drives."""

    def __init__(
        self, ctx: BaseContext, k: ChannelKeys, name: str, spec: DurableSpec,
        selector: Selector | None,
    ) -> None:  # fmt: skip
        self.ctx: BaseContext = ctx
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

    def _group(self) -> Flow[dict[str, Any]]:
        """Its XINFO GROUPS entry, with the batches a Spark query planned over it under
        `planned` (read in the same round trip)."""
        found, batches = yield from send(
            [ops.groups(self.keys, self.name), ops.planned(self.keys, self.name)]
        )
        group = ops.find_group(found, self.name)
        if group is None:
            raise DurableNotFoundError(
                f"durable {self.name!r} does not exist on {self.channel_name!r}"
            )
        return {**group, "planned": batches}

    def depths(self) -> Flow[tuple[int, int]]:
        """(depth, transaction depth): events waiting to be delivered to this durable
        (matching its filter, including events handed back for redelivery), and events
        delivered to its consumers and not yet acknowledged."""
        return (yield from self._depths((yield from self._group())))

    def _depths(self, group: dict[str, Any]) -> Flow[tuple[int, int]]:
        """(depth, transaction depth) of the durable, from its XINFO GROUPS entry."""
        position = group["last-delivered-id"].decode()
        planned = ops.planned_after(group["planned"], position)
        waiting = 0
        if self.kind != "exclusive" and group["pending"]:
            waiting = yield from run(ops.pool_size(self.keys, self.name))
        if self.selector is None and group.get("lag") is not None:
            new = max(0, int(group["lag"]) - planned.events)
        else:  # events a Spark query planned are handed out: counted from after them
            new = yield from self._count_after(planned.last or position)
        held = int(group["pending"]) - waiting
        if self.kind == "exclusive" and self.selector is not None and held:
            held = yield from self._count_held(position)
        return new + waiting, held + planned.events

    def _count_held(self, position: str) -> Flow[int]:
        """What a filtered exclusive durable's holder holds: its reads leave the events its
        filter rejects pending too (acknowledged with the next cumulative ack), so only the
        matching ones from its oldest pending event to its position count."""
        oldest = yield from run(ops.oldest_pending(self.keys, self.name))
        if oldest is None:
            return 0
        return (yield from self._count_after(ids.previous(oldest), until=position))

    def _count_after(self, position: str, until: str = "+") -> Flow[int]:
        """Events after `position` (up to `until`) that match the filter, counted by the
        server in slices."""
        tree = json.dumps(self.selector.to_json() if self.selector else ["lit", True])
        count = 0
        while position:
            found, position = yield from run(
                ops.count_matching(self.keys, self.name, tree, position, until)
            )
            count += found
        return count

    def describing(self) -> Flow[DurableInfo]:
        group = yield from self._group()
        depth, transaction_depth = yield from self._depths(group)
        if self.kind == "exclusive":
            consumers = yield from run(ops.holder(self.keys, self.name))
        else:
            consumers = yield from run(ops.members(self.keys, self.name))
        return DurableInfo(
            channel=self.channel_name, name=self.name, kind=self.kind, filter=self.spec.filter,
            start=self.spec.start, depth=depth, transaction_depth=transaction_depth,
            last_delivered_id=group["last-delivered-id"].decode(), consumers=tuple(consumers),
        )  # fmt: skip

    def browsing(self, count: int) -> Flow[list[Event]]:
        """The next `count` events this durable would be given (after its position, its
        filter applied), oldest first: read only, nothing is delivered or acknowledged.
        Events handed back for redelivery are not among them."""
        group = yield from self._group()
        planned = ops.planned_after(group["planned"], group["last-delivered-id"].decode())
        position = planned.last or group["last-delivered-id"].decode()
        found: list[Event] = []
        for _ in range(BROWSE_SLICES):
            read = yield from run(channel_ops.after(self.keys, self.channel_name, position,
                                                    count))  # fmt: skip
            found += [e for e in read if self.selector is None
                      or self.selector.matches(e.key, e.properties)]  # fmt: skip
            if len(read) < count or len(found) >= count:
                break
            position = read[-1].id
        return found[:count]

    def reading_dead_letters(self, count: int | None) -> Flow[list[DeadLetter]]:
        return dead_letters.dead_letters(self.ctx, self.keys, self.name, count)

    def replaying_dead_letters(self, count: int | None) -> Flow[int]:
        return dead_letters.replay(self.ctx, self.keys, self.name, count)

    def deleting(self) -> Flow[bool]:
        return run(ops.delete(self.keys, self.name))

    def _plan(self, name: str | None, window: int | None, options: ReaderOptions) -> ReaderPlan:
        """What a consumer of this durable gets: its name, auto-ack (a window means explicit
        acknowledgement, as in Universal Messaging), its selectors (exclusive) or window
        (shared)."""
        check_window(self.kind, self.name, window)
        own = compile_filter(options.filter)
        auto_ack = options.auto_ack
        return ReaderPlan(
            names.consumer_name(name) if name is not None else "consumer",
            window is None if auto_ack is None else auto_ack,
            [s for s in (self.selector, own) if s is not None],
            window or self.ctx.settings.client_queue_window,
            own,
            options.replicated,
            options.on_notice,
            options.wait_s,
        )


@dataclass(frozen=True)
class ReaderPlan:
    name: str
    auto_ack: bool
    selectors: list[Selector]
    """An exclusive reader's: the durable's filter and the consumer's own."""
    window: int
    own: Selector | None
    """A shared reader's own filter (Universal Messaging's shared durables)."""
    replicated: int = 0
    """Events are handed out once this many replicas hold them (`Reader.replicated`)."""
    on_notice: Callable[[str], object] | None = None
    wait_s: float = 0.0
    """An exclusive reader's wait for another holder's lease to lapse."""


BROWSE_SLICES = 10
"""Browsing a filtered durable reads at most this many slices of events to find matches."""

ListenerT = TypeVar("ListenerT")
ConsumerT = TypeVar("ConsumerT")
SubscriptionT = TypeVar("SubscriptionT")


class DurableFront(DurableCore, ABC, Generic[ListenerT, ConsumerT, SubscriptionT]):
    """What both clients' durables offer alike: a consumer and a subscription, from
    keywords or an options object, checked and attached the same way. Each client names
    its reader and consumer classes and starts a subscription its own way (a thread, or
    a task once the consumer attached)."""

    consumer_type: Callable[..., ConsumerT]

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
        options: ConsumerOptions | None = None,
    ) -> ConsumerT:
        """A consumer, attached until closed (use it as a context manager; `async with`
        in the asyncio client, or `c = await durable.consumer()`, then `await c.close()`).

        The keywords are `ConsumerOptions`' fields; `options=` takes them as one object
        (keywords given beside it replace its fields). `filter` is the consumer's own
        selector; on a shared or serial durable the latest consumer's filter also decides
        what the durable keeps (Universal Messaging's store filter), and consumers attached
        earlier get a notice (`on_notice`, `Consumer.notices`). `replicated=N`: only events
        that N replicas hold are handed out, so a failover cannot take back what was
        delivered (a `WAIT` in each read's round trip).

        `wait` (exclusive durables): when another consumer holds the durable, wait for its
        lease to lapse (a holder that died, as after kill -9, stops renewing it): False
        (the default) raises `DurableInUseError` at once, a number waits at most that many
        seconds, True as long as it takes (a standby that takes over when the holder
        goes). A supervisor's restart passes the lease time plus a little.
        """
        check_window(self.kind, self.name, prefetch)  # before its size, as always
        opts = ConsumerOptions.of(
            options, prefetch=prefetch, auto_ack=auto_ack, filter=filter, on_notice=on_notice,
            replicated=replicated, wait=wait,
        )  # fmt: skip
        return self._attached(self._plan(name, opts.prefetch, opts))

    def subscribe(
        self,
        listener: ListenerT,
        *,
        window: int | None = None,
        auto_ack: bool | None = None,
        name: str | None = None,
        filter: str | None = None,
        on_notice: Callable[[str], object] | None = None,
        replicated: int = 0,
        wait: Wait = False,
        options: SubscriptionOptions | None = None,
    ) -> SubscriptionT:
        """Deliver events to `listener(event)` until `close()`: on a background thread, or
        from a task in the asyncio client (where the listener may be a coroutine function).
        The keywords are `SubscriptionOptions`' fields (`options=` as for `consumer`)."""
        check_window(self.kind, self.name, window)
        opts = SubscriptionOptions.of(
            options, window=window, auto_ack=auto_ack, filter=filter, on_notice=on_notice,
            replicated=replicated, wait=wait,
        )  # fmt: skip
        window = opts.window
        if window is not None and window < 0 and self.kind != "exclusive":
            window = self.ctx.settings.client_queue_window  # Universal Messaging's default
        return self._subscribed(listener, self._attached(self._plan(name, window, opts)))

    def _attached(self, plan: ReaderPlan) -> ConsumerT:
        """The client's consumer over the reader the plan asks for (not attached yet)."""
        reader: Any
        lock = self._reader_lock()
        if self.kind == "exclusive":
            reader = ExclusiveReader(self.ctx, self.keys, self.name, plan.name, plan.selectors,
                                     lock)  # fmt: skip
            reader.wait_s = plan.wait_s
        else:
            reader = SharedReader(self.ctx, self.keys, self.name, self.kind, plan.name,
                                  plan.window, plan.own, plan.on_notice, lock)  # fmt: skip
        reader.replicated = plan.replicated
        runtime: Any = self.ctx.runtime
        return self.consumer_type(reader, auto_ack=plan.auto_ack, label=repr(self),
                                  block_s=self.ctx.settings.block_s, acks=runtime.acks)  # fmt: skip

    @abstractmethod
    def _reader_lock(self) -> AbstractContextManager[Any]:
        """What guards a reader's state: a lock where a listener may acknowledge on another
        thread than the one that fetches (the sync client); nothing in the asyncio one."""

    @abstractmethod
    def _subscribed(self, listener: ListenerT, consumer: ConsumerT) -> SubscriptionT:
        """A subscription delivering `consumer`'s events to `listener`, started."""


class Durable(DurableFront[Listener, Consumer, Subscription]):
    """A handle on one durable; cheap to make, state lives on the server."""

    ctx: Context
    consumer_type = Consumer

    def __init__(
        self, ctx: Context, k: ChannelKeys, name: str, spec: DurableSpec, selector: Selector | None
    ) -> None:
        super().__init__(ctx, k, name, spec, selector)
        self.executor = ctx.executor

    def depth(self) -> int:
        """Events waiting to be delivered to this durable (matching its filter), including
        events handed back for redelivery."""
        return self.executor.drive(self.depths())[0]

    def transaction_depth(self) -> int:
        """Events delivered to this durable's consumers and not yet acknowledged."""
        return self.executor.drive(self.depths())[1]

    def info(self) -> DurableInfo:
        return self.executor.drive(self.describing())

    def browse(self, count: int = 20) -> list[Event]:
        """The next `count` events this durable would be given, to look at: nothing is
        delivered or acknowledged (its depth does not change)."""
        return self.executor.drive(self.browsing(count))

    def dead_letters(self, count: int | None = None) -> list[DeadLetter]:
        """Events given up on after `max_deliveries`, oldest first."""
        return self.executor.drive(self.reading_dead_letters(count))

    def replay_dead_letters(self, count: int | None = None) -> int:
        """Publish dead letters to the channel again as new events; returns how many."""
        return self.executor.drive(self.replaying_dead_letters(count))

    def delete(self) -> bool:
        """Delete the durable; its events stay on the channel for the other durables."""
        return self.executor.drive(self.deleting())

    def _reader_lock(self) -> AbstractContextManager[Any]:
        return threading.RLock()

    def _subscribed(self, listener: Listener, consumer: Consumer) -> Subscription:
        return Subscription(consumer, listener, self.ctx.runtime)


def check_window(kind: str, name: str, size: int | None) -> None:
    """`InvalidWindowError` for a window or prefetch on an exclusive durable (the size
    itself is checked by the options)."""
    if size is not None and kind == "exclusive":
        raise InvalidWindowError(
            f"a window or prefetch applies to shared and serial durables only; "
            f"{name!r} is exclusive (one consumer, cumulative ack)"
        )


def _not_int(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool)


__all__ = ["POOL", "Durable", "DurableCore", "DurableFront", "DurableInfo", "DurableSpec", "Kind",
           "ReaderPlan", "creating", "load_durable", "loading"]  # fmt: skip
