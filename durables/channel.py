"""Channels: one Redis stream each, with a meta hash and the specs of its durables."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from . import names
from .durable import Durable, DurableInfo, Kind, create_durable, durable_infos
from .errors import ChannelFullError, ChannelNotFound, PayloadError
from .events import Message, Properties, check_key, encode_event, tombstone
from .housekeeping import trim_channel
from .ids import normal
from .replies import server_errors, text

if TYPE_CHECKING:
    from .client import Client

FullPolicy = Literal["reject", "drop_oldest"]
MAX_BATCH = 1000
"""Events per publish script call: big enough to amortise the round trip, small enough not to
stall the server."""


@dataclass(frozen=True)
class ChannelInfo:
    """A channel's state at one moment."""

    name: str
    length: int
    first_id: str | None
    last_id: str | None
    durables: tuple[str, ...]
    ttl_s: float | None = None
    capacity: int | None = None
    full: FullPolicy = "reject"
    keyed: bool = False


class Channel:
    """A named stream of events; durables on it are independent subscriptions."""

    def __init__(self, client: Client, name: str) -> None:
        self.client = client
        self.name = name
        self.keys = client.keys(name)
        k = self.keys
        self._publish_keys = (k.stream, k.meta, k.last_values, k.last_ids)

    def __repr__(self) -> str:
        return f"Channel({self.name!r})"

    def publish(
        self, data: Any, key: str | None = None, properties: Properties | None = None
    ) -> str:
        """Append one event; returns its id once the server has stored it."""
        limit = self.client.settings.max_payload_bytes
        event_id = self._publish_batch(1, *encode_event(data, key, properties, limit))[0]
        self.client.maybe_housekeep(self.name)
        return event_id

    def publish_many(self, messages: Iterable[Message]) -> list[str]:
        """Append events in order, in one round trip per 1,000; returns their ids.

        Every message is checked before any is stored: a bad one stores none.
        """
        limit = self.client.settings.max_payload_bytes
        flat: list[bytes] = []
        for m in messages:
            if type(m) is not Message and not isinstance(m, Message):
                raise PayloadError(f"publish_many takes durables.Message objects, got {m!r:.60}")
            flat += encode_event(m.data, m.key, m.properties, limit)
        ids: list[str] = []
        step = MAX_BATCH * 4
        for start in range(0, len(flat), step):
            part = flat[start : start + step]
            ids += self._publish_batch(len(part) // 4, *part)
        self.client.maybe_housekeep(self.name)
        return ids

    def remove_key(self, key: str) -> str:
        """Publish a tombstone for `key`: a keyed channel forgets its last value, and session
        caches drop the entry. Returns the tombstone's event id."""
        return self._publish_batch(1, *tombstone(check_key(key)))[0]

    def last_values(self) -> dict[str, tuple[str, bytes]]:
        """A keyed channel's last value of every key: key -> (event id, data)."""
        k = self.keys
        pipe = self.client.redis.pipeline(transaction=False)
        pipe.hgetall(k.last_values)
        pipe.hgetall(k.last_ids)
        with server_errors(f"channel {self.name!r}"):
            values, ids = pipe.execute()
        return {text(key): (text(ids.get(key, b"")), value) for key, value in values.items()}

    def _publish_batch(self, count: int, *parts: bytes) -> list[str]:
        """One publish.lua call: `count` events, four encoded values each."""
        args: tuple[int | bytes, ...] = (count, *parts)
        keys = self._publish_keys
        try:
            with server_errors(f"publish to {self.name!r}"):
                ids = self.client.scripts.publish(keys=keys, args=args)
        except ChannelFullError:
            trim_channel(self.client, self.name)  # acknowledged events may make room
            with server_errors(f"publish to {self.name!r}"):
                ids = self.client.scripts.publish(keys=keys, args=args)
        return [i.decode() for i in ids]

    def info(self) -> ChannelInfo:
        """Length, first and last ids, durables and rules of this channel."""
        return channel_infos(self.client, [self.name])[0]

    def purge(self, up_to: str | None = None) -> int:
        """Remove every event (or those up to and including `up_to`); durables let go of them too.

        Returns how many events were removed.
        """
        last = "+" if up_to is None else normal(up_to)
        return trim_channel(self.client, self.name, mode="purge", up_to=last)

    def delete(self) -> bool:
        """Delete the channel, its events and its durables. Returns False if it did not exist."""
        from .housekeeping import delete_channel

        return delete_channel(self.client, self.name)

    def durable(
        self,
        name: str,
        kind: Kind = "exclusive",
        start: str = "earliest",
        filter: str | None = None,
        max_deliveries: int | None = None,
    ) -> Durable:
        """Get or create a durable; `DurableExistsError` if it exists with another kind/filter."""
        return create_durable(self, name, kind, start, filter, max_deliveries)

    def get_durable(self, name: str) -> Durable:
        """An existing durable; `DurableNotFound` otherwise."""
        names.durable_name(name)
        return Durable.load(self, name)

    def durables(self) -> list[DurableInfo]:
        """Every durable on this channel, with its depth."""
        return durable_infos(self, self.durable_names())

    def durable_names(self) -> list[str]:
        with server_errors(f"channel {self.name!r}"):
            raw = self.client.redis.hkeys(self.keys.durables)
        return sorted(text(n) for n in raw)


def channel_infos(client: Client, channels: Sequence[str]) -> list[ChannelInfo]:
    """ChannelInfo for each name, in one round trip."""
    pipe = client.redis.pipeline(transaction=False)
    for name in channels:
        k = client.keys(name)
        pipe.hgetall(k.meta)
        pipe.xlen(k.stream)
        pipe.xrange(k.stream, count=1)
        pipe.xrevrange(k.stream, count=1)
        pipe.hkeys(k.durables)
    with server_errors("channel info"):
        replies = pipe.execute()
    infos = []
    for i, name in enumerate(channels):
        meta, length, first, last, durables = replies[i * 5 : i * 5 + 5]
        if not meta:
            raise ChannelNotFound(f"channel {name!r} does not exist")
        infos.append(_info(name, meta, length, first, last, durables))
    return infos


def _info(
    name: str, meta: dict[bytes, bytes], length: int, first: Any, last: Any, durables: list[bytes]
) -> ChannelInfo:
    ttl_ms = meta.get(b"ttl_ms")
    capacity = meta.get(b"capacity")
    return ChannelInfo(
        name=name,
        length=length,
        first_id=first[0][0].decode() if first else None,
        last_id=last[0][0].decode() if last else None,
        durables=tuple(sorted(d.decode() for d in durables)),
        ttl_s=int(ttl_ms) / 1000 if ttl_ms else None,
        capacity=int(capacity) if capacity else None,
        full="drop_oldest" if meta.get(b"full") == b"drop_oldest" else "reject",
        keyed=meta.get(b"keyed") == b"1",
    )


def now_ms() -> int:
    return int(time.time() * 1000)
