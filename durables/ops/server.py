"""The server itself: which one it is, and whether durables can run on it."""

from __future__ import annotations

from typing import Any

from ..errors import ServerVersionError
from .base import Op, command

MIN_REDIS = (7, 0, 0)
MIN_VALKEY = (7, 2, 0)


def _as_dict(reply: Any) -> dict[str, object]:
    return dict(reply)


def info(context: str) -> Op[dict[str, object]]:
    """`INFO server`, parsed; `context` names the server for error messages."""
    return command("INFO", "server", parse=_as_dict, context=context)


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


__all__ = ["MIN_REDIS", "MIN_VALKEY", "check_version", "info"]
