"""Publishing encoded events: one `publish.lua` call per batch, room made when full."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import ChannelFullError
from .ops import channels as channel_ops
from .retention import trim_channel

if TYPE_CHECKING:
    from .context import Context
    from .keys import ChannelKeys

MAX_BATCH = 1000
"""Events per publish script call: big enough to amortise the round trip, small enough not to
stall the server."""


def publish_encoded(
    ctx: Context, k: ChannelKeys, count: int, parts: Sequence[bytes], *, retry: bool = True
) -> list[str]:
    """Store `count` events (four encoded values each, `events.encode_event`); their ids.

    A channel at its capacity is trimmed once (acknowledged events may make room) and
    the batch tried again; `ChannelFullError` if still full.
    """
    op = channel_ops.publish(k, count, parts)
    try:
        return ctx.executor.run(op, retry=retry)
    except ChannelFullError:
        trim_channel(ctx, k)
        return ctx.executor.run(op, retry=retry)


def publish_flat(ctx: Context, k: ChannelKeys, flat: list[bytes]) -> list[str]:
    """Store events given as one flat list of encoded values, `MAX_BATCH` per call."""
    ids: list[str] = []
    step = MAX_BATCH * 4
    for start in range(0, len(flat), step):
        part = flat[start : start + step]
        ids += publish_encoded(ctx, k, len(part) // 4, part)
    ctx.touch(k.channel)
    return ids
