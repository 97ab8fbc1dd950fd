"""Validation of the names a user types, before any of them reaches a key.

Names become part of Redis keys (inside or after the `{channel}` hash tag), so
braces, glob characters, whitespace and control characters are refused.
"""

from __future__ import annotations

import re

from .errors import InvalidNameError

MAX_CHANNEL_NAME = 200
MAX_DURABLE_NAME = 100
_NAME = re.compile(r"[\w.:/@+=-]+", re.ASCII)
_FORBIDDEN_HINT = "letters, digits and . : / @ + = - _ (no spaces, braces, * ? [ ] or controls)"


def _check(kind: str, name: object, limit: int) -> str:
    if not isinstance(name, str):
        raise InvalidNameError(f"{kind} name must be a str, got {type(name).__name__}")
    if not name:
        raise InvalidNameError(f"{kind} name must not be empty")
    if len(name) > limit:
        raise InvalidNameError(f"{kind} name is {len(name)} characters long; the limit is {limit}")
    if not _NAME.fullmatch(name):
        bad = next(ch for ch in name if not _NAME.fullmatch(ch))
        raise InvalidNameError(f"{kind} name {name!r} contains {bad!r}; use {_FORBIDDEN_HINT}")
    return name


def channel_name(name: object) -> str:
    """Return `name` if it is a valid channel name, else raise `InvalidNameError`."""
    return _check("channel", name, MAX_CHANNEL_NAME)


def durable_name(name: object) -> str:
    """Return `name` if it is a valid durable name, else raise `InvalidNameError`."""
    return _check("durable", name, MAX_DURABLE_NAME)


def session_id(name: object) -> str:
    """Return `name` if it is a valid session (client) id, else raise `InvalidNameError`."""
    return _check("session", name, MAX_DURABLE_NAME)


def consumer_name(name: object) -> str:
    """Return `name` if it is a valid consumer name, else raise `InvalidNameError`."""
    return _check("consumer", name, MAX_DURABLE_NAME)
