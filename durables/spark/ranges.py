"""Id ranges of a stream and how a batch is split into read tasks (pure, no I/O).

Stream ids are `<ms>-<seq>`, so a range can be cut by time without asking the
server where its events are: each task gets an equal slice of the range's
milliseconds. Bursty streams make uneven tasks; even ones would need the server
to walk every entry first.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ids import MAX_SEQ, key

FIRST_ID = "0-0"
"""The position before every event: a group created at 'earliest' stands here."""
MIN_EVENTS_PER_TASK = 1000
"""A batch smaller than this many events per task is read by fewer tasks: a task costs
more than reading a thousand events."""


@dataclass(frozen=True)
class IdRange:
    """Events with `first <= id <= last`, both ends inclusive."""

    first: str
    last: str


def after(event_id: str) -> str:
    """The smallest id above `event_id`."""
    ms, seq = key(event_id)
    return f"{ms + 1}-0" if seq >= MAX_SEQ else f"{ms}-{seq + 1}"


def is_after(a: str, b: str) -> bool:
    """True when id `a` comes after id `b`."""
    return key(a) > key(b)


def split(first: str, last: str, tasks: int) -> list[IdRange]:
    """`[first, last]` cut into at most `tasks` consecutive ranges of equal time span."""
    if is_after(first, last):
        return []
    lo_ms, hi_ms = key(first)[0], key(last)[0]
    tasks = max(1, min(tasks, hi_ms - lo_ms + 1))
    ranges, start = [], first
    for i in range(1, tasks):
        cut_ms = lo_ms + (hi_ms - lo_ms + 1) * i // tasks - 1
        cut = f"{cut_ms}-{MAX_SEQ}"
        if is_after(start, cut):
            continue
        ranges.append(IdRange(start, cut))
        start = after(cut)
    ranges.append(IdRange(start, last))
    return ranges


def tasks_for(events: int | None, wanted: int) -> int:
    """How many tasks read a batch of `events` (None: unknown, so as many as wanted)."""
    if events is None:
        return wanted
    return max(1, min(wanted, -(-events // MIN_EVENTS_PER_TASK)))
