"""The server itself: which one it is, and whether durables can run on it."""

from __future__ import annotations

from typing import Any

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


__all__ = ["MIN_REDIS", "MIN_VALKEY", "check_version", "health", "info", "save_setting"]
