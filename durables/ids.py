"""Stream ids as durables uses them: parsing, ordering and neighbours (pure)."""

from __future__ import annotations

import re

from .errors import InvalidStartError

MAX_SEQ = 2**64 - 1
LAST_ID = f"{MAX_SEQ}-{MAX_SEQ}"
"""The largest id a stream can hold: no id comes after it."""
_ID = re.compile(r"(\d{1,20})(?:-(\d{1,20}))?")


def parse(event_id: str) -> tuple[int, int]:
    """`'1700000000000-3'` -> `(1700000000000, 3)`; a bare `'170...'` means sequence 0."""
    match = _ID.fullmatch(event_id) if isinstance(event_id, str) else None
    if match is None:
        raise InvalidStartError(f"{event_id!r} is not an event id (expected '<ms>-<seq>')")
    ms, seq = int(match.group(1)), int(match.group(2) or 0)
    if ms > MAX_SEQ or seq > MAX_SEQ:
        raise InvalidStartError(f"{event_id!r} is out of range for an event id")
    return ms, seq


def normal(event_id: str) -> str:
    """The canonical `'<ms>-<seq>'` form of an id."""
    ms, seq = parse(event_id)
    return f"{ms}-{seq}"


def previous(event_id: str) -> str:
    """The largest id below `event_id` (a group set there delivers `event_id` next)."""
    ms, seq = parse(event_id)
    if seq > 0:
        return f"{ms}-{seq - 1}"
    if ms == 0:
        return "0-0"
    return f"{ms - 1}-{MAX_SEQ}"


def key(event_id: str) -> tuple[int, int]:
    """Sort key for ids known to be well formed (the server's own)."""
    ms, _, seq = event_id.partition("-")
    return int(ms), int(seq or 0)
