"""Operations on channels: create, publish, look up, describe."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from .. import keys
from ..errors import ChannelNotFoundError, DurablesError
from ..events import SHAPE_DATA, SHAPE_PROPS, Batch, Event, event_from_entry
from ..records import ChannelInfo
from .base import Op, as_bool, command, text, texts

TRIPS = frozenset({"TRIPS"})
_NONE: frozenset[str] = frozenset()


def ensure(k: keys.ChannelKeys, options: dict[str, int | str], created_ms: int) -> list[Op[Any]]:
    """Get or create: the meta hash (options given overwrite), and the registry entry."""
    context = f"channel {k.channel!r}"
    ops: list[Op[Any]] = [command("HSETNX", k.meta, "created_ms", created_ms, context=context)]
    if options:
        flat = [part for item in options.items() for part in item]
        ops.append(command("HSET", k.meta, *flat, context=context))
    ops.append(command("SADD", keys.registry(k.ns), k.channel, context=context))
    return ops


def unmade(k: keys.ChannelKeys) -> list[Op[Any]]:
    """What `ensure` made of a new channel, removed (its creation was refused midway)."""
    context = f"channel {k.channel!r}"
    return [
        command("DEL", k.meta, context=context),
        command("SREM", keys.registry(k.ns), k.channel, context=context),
    ]


def exists(k: keys.ChannelKeys) -> Op[bool]:
    return command("EXISTS", k.meta, parse=as_bool, context=f"channel {k.channel!r}")


def names(ns: str) -> Op[list[str]]:
    """Every channel name of the namespace, sorted."""
    return command("SMEMBERS", keys.registry(ns), parse=texts, context="listing channels")


class TripsUnnamed(DurablesError):
    """`publish.lua` needs the session trip points' keys, which the call left out (TRIPS):
    nothing was stored, and the call is made again with them (never reaches a caller)."""


def _ids(reply: Any) -> list[str]:
    """`publish.lua`'s reply: a list of ids, or one new event's id alone."""
    if type(reply) is bytes:
        return [reply.decode()]
    if isinstance(reply, Exception):  # TRIPS, tolerated to come here
        raise TripsUnnamed(str(reply))
    return [i.decode() for i in reply]


def publish(
    k: keys.ChannelKeys,
    batch: Batch,
    dedupe_window_ms: int,
    producer: str,
    sequence: int,
    *,
    trips: bool = True,
) -> Op[list[str]]:
    """The events of `batch` (`events.Batch`: a shape letter per event, its values); their ids.

    `producer` and `sequence` (the first event's; `producers.Lane`) make the call
    idempotent: sent again after a lost reply, it is stored once and returns the same ids.
    Without `trips`, a call of plain events leaves out the keys of the session trip points:
    `TripsUnnamed` if the channel may have any (the server looks at its own flag).
    """
    script_keys, context = _publish_keys(k)
    if not batch.shape.translate(None, _PLAIN_SHAPES):  # no key, op or message id
        script_keys = script_keys[: _PLAIN_KEYS if trips else _BARE_KEYS]
    args = (dedupe_window_ms, bytes(batch.shape), producer, sequence, *batch.values)
    return Op(args, _ids, "publish", script_keys, context, _NONE if trips else TRIPS)


_PLAIN_SHAPES = SHAPE_DATA + SHAPE_PROPS
_PLAIN_KEYS = 5
"""A publish of plain events names only the keys it may touch (`publish.lua`'s KEYS[1..5]),
and only the stream and the meta hash (`_BARE_KEYS`) where no session has a trip point:
each key costs the server about 1,200 instructions, 1.3 % of a single publish."""
_BARE_KEYS = 2


@lru_cache(maxsize=1024)
def _publish_keys(k: keys.ChannelKeys) -> tuple[tuple[str, ...], str]:
    """A publish's KEYS and context, formatted once per channel (half the client's work to
    build a single publish otherwise)."""
    script_keys = (
        k.stream,
        k.meta,
        k.session_trips,
        k.session_limits,
        k.overflowed,
        k.last_values,
        k.last_ids,
        k.message_ids,
        k.message_times,
    )
    return script_keys, f"publish to {k.channel!r}"


def last_values(k: keys.ChannelKeys) -> list[Op[Any]]:
    """A keyed channel's last values and the ids that set them: parse with `parse_last`."""
    context = f"channel {k.channel!r}"
    return [
        command("HGETALL", k.last_values, context=context),
        command("HGETALL", k.last_ids, context=context),
    ]


def parse_last(values: dict[bytes, bytes], ids: dict[bytes, bytes]) -> dict[str, tuple[str, bytes]]:
    return {text(key): (text(ids.get(key, b"")), value) for key, value in values.items()}


def durable_names(k: keys.ChannelKeys) -> Op[list[str]]:
    return command("HKEYS", k.durables, parse=texts, context=f"channel {k.channel!r}")


INFO_OPS = 5
_SETTINGS = ("created_ms", "ttl_ms", "capacity", "full", "keyed")


def info(k: keys.ChannelKeys) -> list[Op[Any]]:
    """What `parse_info` needs about one channel (five commands, for one pipeline)."""
    return [
        # the settings alone: the meta hash also holds every recent producer's record
        command("HMGET", k.meta, *_SETTINGS, context="channel info"),
        command("XLEN", k.stream, context="channel info"),
        command("XRANGE", k.stream, "-", "+", "COUNT", 1, context="channel info"),
        command("XREVRANGE", k.stream, "+", "-", "COUNT", 1, context="channel info"),
        command("HKEYS", k.durables, context="channel info"),
    ]


def parse_info(name: str, replies: Sequence[Any]) -> ChannelInfo:
    """The ChannelInfo from the five replies of `info`; `ChannelNotFoundError` if it has no meta."""
    settings, length, first, last, durables = replies
    created_ms, ttl_ms, capacity, full, keyed = settings
    if created_ms is None:
        raise ChannelNotFoundError(f"channel {name!r} does not exist")
    return ChannelInfo(
        name=name,
        length=int(length),
        first_id=text(first[0][0]) if first else None,
        last_id=text(last[0][0]) if last else None,
        durables=tuple(texts(durables)),
        ttl_s=int(ttl_ms) / 1000 if ttl_ms else None,
        capacity=int(capacity) if capacity else None,
        full="drop_oldest" if full == b"drop_oldest" else "reject",
        keyed=keyed == b"1",
    )


def _replicas(reply: Any) -> int:
    return int(reply)


def wait_replicas(replicas: int, timeout_s: float) -> Op[int]:
    """`WAIT`: how many replicas have the writes sent before it on the same connection."""
    return command(
        "WAIT",
        replicas,
        max(1, int(timeout_s * 1000)),
        parse=_replicas,
        context="waiting for replicas",
    )


def _events(channel: str) -> Any:
    def parse(reply: Any) -> list[Event]:
        return [e for e in (event_from_entry(channel, entry) for entry in reply or ()) if e]

    return parse


def newest(k: keys.ChannelKeys, channel: str, count: int) -> Op[list[Event]]:
    """The channel's newest `count` events, newest first (a plain read: nothing is
    delivered or acknowledged)."""
    return command(
        "XREVRANGE",
        k.stream,
        "+",
        "-",
        "COUNT",
        count,
        parse=_events(channel),
        context=f"channel {channel!r}",
        tolerate=frozenset({"no"}),
    )


def after(k: keys.ChannelKeys, channel: str, position: str, count: int) -> Op[list[Event]]:
    """Up to `count` events after `position`, oldest first (a plain read)."""
    return command(
        "XRANGE",
        k.stream,
        "(" + position,
        "+",
        "COUNT",
        count,
        parse=_events(channel),
        context=f"channel {channel!r}",
    )
