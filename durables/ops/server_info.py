"""The server itself: which one it is, and whether durables can run on it."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..errors import ServerVersionError
from ..server_health import SECTIONS, ServerHealth, info_fields, parse_health
from .base import Op, command

MIN_REDIS = (7, 0, 0)
MIN_VALKEY = (7, 2, 0)


def info(context: str) -> Op[dict[str, object]]:
    """`INFO` of the sections read at connect (the version, and what `server_health`
    judges), parsed; `context` names the server for error messages."""
    return command("INFO", *SECTIONS, parse=info_fields, context=context)


def health() -> Op[ServerHealth]:
    """What `server_health` judges, read again while a client runs (by its heartbeat)."""
    return command("INFO", *SECTIONS[1:], parse=_health, context="server check")


def _health(reply: Any) -> ServerHealth:
    return parse_health(info_fields(reply))


def save_setting(reply: Any) -> str | None:
    """`CONFIG GET save`'s value (a RESP2 list or a RESP3 map), or None."""
    values = list(reply.values()) if isinstance(reply, dict) else list(reply or [])[1::2]
    if not values:
        return None
    value = values[0]
    return value.decode() if isinstance(value, bytes) else str(value)


CONFIG_SAVE = ("CONFIG", "GET", "save")


@dataclass(frozen=True)
class Ask:
    """One command of the first contact: to the server (`node` None; on a cluster, through
    the cluster client) or to one primary of a cluster. `optional`: a refusal answers None
    (`CONFIG GET` where the user may not ask, a managed service)."""

    args: tuple[Any, ...]
    node: Any = None
    optional: bool = False


@dataclass(frozen=True)
class Primaries:
    """Asks for a cluster's primaries: the answer is a list of (node, its name)."""


Contact: TypeAlias = Generator[Ask | Primaries, Any, tuple[dict[str, object], list[ServerHealth]]]


def first_contact(cluster: bool) -> Contact:
    """The server's INFO, and how each primary keeps what it confirms (every primary of a
    cluster): a plan both clients carry out, on a connection of its own, by hand (an
    executor would log a lost connection at a wrong password), blocking or awaited."""
    op = info("")
    found = op.parse((yield Ask(op.args)))
    if not cluster:
        return found, [parse_health(found, save_setting((yield Ask(CONFIG_SAVE, optional=True))))]
    healths = []
    for node, name in (yield Primaries()):
        primary = op.parse((yield Ask(op.args, node)))
        save = save_setting((yield Ask(CONFIG_SAVE, node, optional=True)))
        healths.append(parse_health(primary, save, name))
    return found, healths


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def check_version(info: dict[str, object]) -> str:
    """Refuse servers too old for the stream commands durables relies on; return a label."""
    redis_version = str(info.get("redis_version", "0"))
    valkey_version = info.get("valkey_version")
    if valkey_version is not None:
        if _version(str(valkey_version)) < MIN_VALKEY:
            raise ServerVersionError(f"valkey {valkey_version} is too old: durables needs 7.2+")
        return f"valkey {valkey_version}"
    if _version(redis_version) < MIN_REDIS:
        raise ServerVersionError(f"redis {redis_version} is too old: durables needs 7.0+")
    return f"redis {redis_version}"


__all__ = [
    "MIN_REDIS",
    "MIN_VALKEY",
    "Ask",
    "Contact",
    "Primaries",
    "check_version",
    "first_contact",
    "health",
    "info",
    "save_setting",
]
