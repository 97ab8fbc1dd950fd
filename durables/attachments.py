"""Who is attached to a durable, as an operator sees them: each consumer's host and
process (from its id), window, held events, last seen and lease left. Pure: it reads the
replies `durables.figures` gathered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
            )
        )
    return result


__all__ = ["ConsumerFigures", "attached", "consumer_origin", "scores"]
