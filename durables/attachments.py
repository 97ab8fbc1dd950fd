"""Who is attached to a durable, as an operator sees them: each consumer's host and
process (from its id), window, held events, keys (keyed durables), last seen and lease
left. Pure: it reads the replies `durables.figures` gathered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .key_hash import owner_of
from .records import DurableInfo
from .reply_parsers import text


@dataclass(frozen=True)
class ConsumerFigures:
    """One consumer attached to a durable (an exclusive durable's holder, a shared one's
    member)."""

    id: str
    name: str
    """The name its application gave it."""
    host: str | None
    pid: int | None
    window: int | None
    """Shared and serial durables: how many events it may hold."""
    held: int
    """Events handed to it and not yet acknowledged."""
    last_seen_s: float | None
    """Seconds since it last read or acknowledged (the server's idle time)."""
    lease_left_s: float | None
    """Seconds until its lease lapses unless renewed."""
    keys: int | None = None
    """Keyed durables: the keys it holds an event of (each key is out with one consumer)."""


@dataclass(frozen=True)
class KeyFigures:
    """A keyed durable's keys now."""

    held: dict[str, int]
    """Consumer id -> how many keys have an event out with it."""
    moving: int
    """Keys out with a consumer that no longer owns them (one joined): each moves to its
    new owner once that event is acknowledged (a hand-over)."""
    waiting: int
    """Keys whose event out was handed back (rolled back, or its holder left or lapsed):
    it is dealt again, first, before the key's later events."""


def key_figures(holders: dict[str, str], members: list[str]) -> KeyFigures:
    """From who holds each key of a keyed durable whose event is out (key -> consumer,
    `lua/key_holders.lua`) and the attached members."""
    held: dict[str, int] = dict.fromkeys(members, 0)
    moving = waiting = 0
    for key, consumer in holders.items():
        if consumer not in held:
            waiting += 1  # in the pool (or with a consumer that left): dealt again first
            continue
        held[consumer] += 1
        if owner_of(key, members) != consumer:
            moving += 1
    return KeyFigures(held, moving, waiting)


def consumer_origin(consumer_id: str) -> tuple[str, str | None, int | None]:
    """(name, host, pid) of a consumer id: `name@host:pid:token` (an exclusive holder) or
    `name#host:pid:token` (a shared member)."""
    for mark in ("@", "#"):
        name, found, rest = consumer_id.partition(mark)
        if found:
            parts = rest.split(":")
            if len(parts) >= 3 and parts[-2].isdigit():
                return name, ":".join(parts[:-2]), int(parts[-2])
            return name, None, None
    return consumer_id, None, None


def scores(reply: Any) -> dict[str, float]:
    return {text(name): float(score) for name, score in reply or ()}


def attached(
    d: DurableInfo,
    windows: dict[str, int],
    found: list[dict[str, Any]],
    alive: dict[str, float],
    lease_ms: int,
    now_ms: int,
    keys: KeyFigures | None = None,
) -> list[ConsumerFigures]:
    """The attached consumers (the holder, or the members), from `XINFO CONSUMERS`, the
    members' lease expiries and the holder's lease."""
    by_name = {text(c["name"]): c for c in found}
    result = []
    for consumer_id in d.consumers:
        info = by_name.get(consumer_id, {})
        name, host, pid = consumer_origin(consumer_id)
        if d.kind == "exclusive":
            left = lease_ms / 1000 if lease_ms > 0 else None
        else:
            expiry = alive.get(consumer_id)
            left = None if expiry is None else max(0.0, (expiry - now_ms) / 1000)
        idle = info.get("idle")
        result.append(
            ConsumerFigures(
                consumer_id,
                name,
                host,
                pid,
                windows.get(consumer_id),
                int(info.get("pending") or 0),
                None if idle is None else int(idle) / 1000,
                left,
                None if keys is None else keys.held.get(consumer_id, 0),
            )
        )
    return result


__all__ = ["ConsumerFigures", "KeyFigures", "attached", "consumer_origin", "key_figures", "scores"]
