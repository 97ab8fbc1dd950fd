"""Channels: one Redis stream each, with a meta hash and the specs of its durables."""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import names
from .durable import Durable, DurableCore, creating, load_durable, loading
from .errors import (
    AccessDeniedError,
    ChannelNotFoundError,
    ConfigError,
    DurablesError,
    PayloadError,
)
from .events import (
    Batch,
    Encoded,
    Event,
    Message,
    Properties,
    ack_op,
    check_key,
    encode_event,
    tombstone,
)
from .ids import LAST_ID, normal
from .ops import channels as ops
from .ops import sessions as session_ops
from .ops.flows import Flow, run, send
from .publishing import MAX_BATCH, packed, publish_batches, publish_encoded
from .records import ChannelInfo, DurableInfo, DurableSpec, FullPolicy, Kind, Nack
from .retention import delete_channel, trim_channel
from .selector import Selector

if TYPE_CHECKING:
    from .io.context import BaseContext, Context

DEFAULT_ACK_TIMEOUT_S = 30.0


class ChannelCore:
    """A named stream of events, for both clients: what publishing, listing and purging
    ask of the server, as flows (`ops.flows`) each client drives."""

    def __init__(self, ctx: BaseContext, name: str) -> None:
        self.ctx: BaseContext = ctx
        self.name = name
        self.keys = ctx.keys(name)

    def __repr__(self) -> str:
        return f"Channel({self.name!r})"

    def publishing(
        self,
        data: Any,
        key: str | None,
        properties: Properties | None,
        message_id: str | None,
        ack_required: bool,
        ack_timeout: float,
        replicas: int | None,
        replica_timeout: float | None,
    ) -> Flow[list[str]]:
        limit = self.ctx.settings.max_payload_bytes
        op = ack_op(ack_timeout) if ack_required else b""
        encoded = encode_event(data, key, properties, limit, op, message_id)
        return publish_encoded(
            self.ctx,
            self.keys,
            Batch.of(encoded),
            replicas=_replicas(replicas),
            replica_timeout_s=_positive("replica_timeout", replica_timeout),
        )

    def publishing_many(self, messages: Iterable[Message]) -> Flow[list[str]]:
        """Every message is checked (and encoded) before any is stored."""
        limit = self.ctx.settings.max_payload_bytes
        encoded: list[Encoded] = []
        for m in messages:
            if type(m) is not Message and not isinstance(m, Message):
                raise PayloadError(f"publish_many takes durables.Message objects, got {m!r:.60}")
            encoded.append(encode_event(m.data, m.key, m.properties, limit, b"", m.message_id))
        return publish_batches(self.ctx, self.keys, packed(encoded))

    def removing_key(self, key: str) -> Flow[list[str]]:
        return publish_encoded(self.ctx, self.keys, Batch.of(tombstone(check_key(key))))

    def browsing(self, count: int) -> Flow[list[Event]]:
        """The newest `count` events, newest first: read only, nothing is delivered."""
        return run(ops.newest(self.keys, self.name, count))

    def reading_nacks(self, count: int | None) -> Flow[list[Nack]]:
        return run(session_ops.nacks(self.keys, count))

    def reading_last_values(self) -> Flow[dict[str, tuple[str, bytes]]]:
        values, ids = yield from send(ops.last_values(self.keys))
        return ops.parse_last(values, ids)

    def describing(self) -> Flow[ChannelInfo]:
        return (yield from channel_infos(self.ctx, [self.name]))[0]

    def purging(self, up_to: str | None) -> Flow[int]:
        last = "+" if up_to is None else normal(up_to)
        if last == LAST_ID:  # up to the last id there can be is everything (none after it)
            last = "+"
        return trim_channel(self.ctx, self.keys, mode="purge", up_to=last)

    def deleting(self) -> Flow[bool]:
        return delete_channel(self.ctx, self.keys)

    def listing_durables(self) -> Flow[list[DurableInfo]]:
        found = []
        for name in (yield from self.naming_durables()):
            durable = DurableCore(self.ctx, self.keys, name, *(yield from loading(self.keys, name)))
            found.append((yield from durable.describing()))
        return found

    def naming_durables(self) -> Flow[list[str]]:
        return run(ops.durable_names(self.keys))


PublishT = TypeVar("PublishT")
DurableT = TypeVar("DurableT")


class ChannelFront(ChannelCore, ABC, Generic[PublishT, DurableT]):
    """What both clients' channels take alike: a publish's and a durable's arguments,
    checked and made into a flow; each client drives it (blocking, or awaited)."""

    def publish(
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
    ) -> PublishT:
        """Append one event; returns its id once the server has stored it.

        `message_id`: the producer's id; the same id within `dedupe_window_s` is stored
        once and its first event id returned (a retry after a failover is safe).
        `ack_required`: each session interested in the channel must acknowledge the event
        within `ack_timeout` seconds (explicitly, or when its listener returns with the
        session's auto_ack); one that does not is recorded in `nacks()`.
        `replicas`: wait until that many replicas have it (`ReplicationError` if fewer
        confirm within `replica_timeout` seconds); defaults from the settings.
        """
        return self._published(
            self.publishing(
                data,
                key,
                properties,
                message_id,
                ack_required,
                ack_timeout,
                replicas,
                replica_timeout,
            )
        )

    def durable(
        self,
        name: str,
        kind: Kind | None = None,
        start: str | None = None,
        filter: str | None = None,
        max_deliveries: int | None = None,
    ) -> DurableT:
        """Get or create a durable: with no kind, the one of that name whatever its kind, else
        a new exclusive one; `start` ('earliest' when None) applies when it is created.
        `DurableExistsError` if it exists with another kind (when given) or filter (compared
        by meaning: `region='eu'` is `region = 'eu'`). With no spec at all (only the name),
        the durable as it is, whatever its kind and filter (a new exclusive one if none)."""
        return self._durable(name, creating(self.keys, name, kind, start, filter, max_deliveries))

    @abstractmethod
    def _published(self, flow: Flow[list[str]]) -> PublishT:
        """The publish flow driven: the event's id (the channel touched for housekeeping)."""

    @abstractmethod
    def _durable(self, name: str, flow: Flow[tuple[DurableSpec, Selector | None]]) -> DurableT:
        """The durable `creating` found or made."""


class Channel(ChannelFront[str, Durable]):
    """A named stream of events; durables on it are independent subscriptions."""

    ctx: Context

    def __init__(self, ctx: Context, name: str) -> None:
        super().__init__(ctx, name)
        self.executor = ctx.executor

    def _published(self, flow: Flow[list[str]]) -> str:
        event_id = self.executor.drive(flow)[0]
        self.ctx.touch(self.name)
        return event_id

    def publish_many(self, messages: Iterable[Message]) -> list[str]:
        """Append events in order, in one round trip per 1,000; returns their ids.

        Every message is checked before any is stored: a bad one stores none.
        """
        return self.executor.drive(self.publishing_many(messages))

    def remove_key(self, key: str) -> str:
        """Publish a tombstone for `key`: a keyed channel forgets its last value, and session
        caches drop the entry. Returns the tombstone's event id."""
        return self.executor.drive(self.removing_key(key))[0]

    def browse(self, count: int = 20) -> list[Event]:
        """The newest `count` events, newest first, to look at: nothing is delivered or
        acknowledged (no durable's depth changes)."""
        return self.executor.drive(self.browsing(count))

    def nacks(self, count: int | None = None) -> list[Nack]:
        """Ack-required events a session did not acknowledge in time ('timeout') or whose
        time passed before they could be sent ('expired_before_sent'), oldest first."""
        return self.executor.drive(self.reading_nacks(count))

    def last_values(self) -> dict[str, tuple[str, bytes]]:
        """A keyed channel's last value of every key: key -> (event id, data)."""
        return self.executor.drive(self.reading_last_values())

    def info(self) -> ChannelInfo:
        """Length, first and last ids, durables and rules of this channel."""
        return self.executor.drive(self.describing())

    def purge(self, up_to: str | None = None) -> int:
        """Remove every event (or those up to and including `up_to`); durables let go of them too.

        Returns how many events were removed.
        """
        return self.executor.drive(self.purging(up_to))

    def delete(self) -> bool:
        """Delete the channel, its events and its durables. Returns False if it did not exist."""
        return self.executor.drive(self.deleting())

    def _durable(self, name: str, flow: Flow[tuple[DurableSpec, Selector | None]]) -> Durable:
        return Durable(self.ctx, self.keys, name, *self.executor.drive(flow))

    def get_durable(self, name: str) -> Durable:
        """An existing durable; `DurableNotFoundError` otherwise."""
        names.durable_name(name)
        return load_durable(self.ctx, self.keys, name)

    def durables(self) -> list[DurableInfo]:
        """Every durable on this channel, with its depth."""
        return self.executor.drive(self.listing_durables())

    def durable_names(self) -> list[str]:
        return self.executor.drive(self.naming_durables())


def _replicas(replicas: object) -> int | None:
    if replicas is not None and (
        not isinstance(replicas, int) or isinstance(replicas, bool) or not 0 <= replicas <= 16
    ):
        raise ConfigError(f"replicas must be an int from 0 to 16, got {replicas!r}")
    return replicas


def _positive(name: str, seconds: object) -> float | None:
    if seconds is not None and (
        not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds <= 0
    ):
        raise ConfigError(f"{name} must be a positive number of seconds, got {seconds!r}")
    return None if seconds is None else float(seconds)


def channel_infos(ctx: BaseContext, channels: Sequence[str]) -> Flow[list[ChannelInfo]]:
    """ChannelInfo for each name, in one round trip."""
    replies = yield from send([op for n in channels for op in ops.info(ctx.keys(n))])
    size = ops.INFO_OPS
    return [ops.parse_info(n, replies[i * size : (i + 1) * size]) for i, n in enumerate(channels)]


def channel_options(
    keyed: bool | None, ttl: float | None, capacity: int | None, full: FullPolicy | None
) -> dict[str, int | str]:
    """The options `opening` stores, checked (`ConfigError` for a bad one)."""
    options: dict[str, int | str] = {}
    if keyed is not None:
        options["keyed"] = int(bool(keyed))
    if ttl is not None:
        if not isinstance(ttl, int | float) or ttl <= 0:
            raise ConfigError(f"ttl must be a positive number of seconds, got {ttl!r}")
        options["ttl_ms"] = max(1, int(ttl * 1000))
    if capacity is not None:
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise ConfigError(f"capacity must be a positive int, got {capacity!r}")
        options["capacity"] = capacity
    if full is not None:
        if full not in ("reject", "drop_oldest"):
            raise ConfigError(f"full must be 'reject' or 'drop_oldest', got {full!r}")
        options["full"] = full
    return options


def opening(ctx: BaseContext, name: str, options: dict[str, int | str] | None) -> Flow[None]:
    """Create the channel if needed; options given are stored, options left out keep theirs.

    An existing channel opened without options is only read, so it opens on a server at
    its maxmemory (consumers must reach a backlog to drain it). Creation is all or nothing:
    a command the server's ACL refuses leaves no part of a new channel behind."""
    names.channel_name(name)
    k = ctx.keys(name)
    existed = yield from run(ops.exists(k))
    if existed and not options:
        return
    try:
        yield from send(ops.ensure(k, options or {}, int(time.time() * 1000)))
    except AccessDeniedError:
        if not existed:
            with contextlib.suppress(DurablesError):
                yield from send(ops.unmade(k))
        raise


def finding(ctx: BaseContext, name: str) -> Flow[None]:
    """`ChannelNotFoundError` unless the channel exists."""
    names.channel_name(name)
    if not (yield from run(ops.exists(ctx.keys(name)))):
        raise ChannelNotFoundError(f"channel {name!r} does not exist")


def open_channel(ctx: Context, name: str, options: dict[str, int | str] | None = None) -> Channel:
    """Get or create a channel; options given are stored, options left out keep their value."""
    ctx.executor.drive(opening(ctx, name, options))
    return Channel(ctx, name)


def get_channel(ctx: Context, name: str) -> Channel:
    """An existing channel; `ChannelNotFoundError` otherwise."""
    ctx.executor.drive(finding(ctx, name))
    return Channel(ctx, name)


__all__ = ["MAX_BATCH", "Channel", "ChannelCore", "ChannelFront", "ChannelInfo", "FullPolicy",
           "channel_infos", "channel_options", "finding", "get_channel", "open_channel",
           "opening"]  # fmt: skip
