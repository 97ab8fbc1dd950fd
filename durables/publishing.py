"""Publishing encoded events: one `publish.lua` call per batch, room made when full.

Flows (`ops.flows`) both clients drive."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import ChannelFullError, ReplicationError
from .events import PER_EVENT
from .ops import channels as channel_ops
from .ops.flows import Flow, run, send
from .retention import trim_channel

if TYPE_CHECKING:
    from .context import BaseContext
    from .keys import ChannelKeys
    from .ops.base import Op

MAX_BATCH = 1000
"""Events per publish script call: big enough to amortise the round trip, small enough not to
stall the server."""


def publish_encoded(
    ctx: BaseContext,
    k: ChannelKeys,
    count: int,
    parts: Sequence[bytes],
    *,
    retry: bool = True,
    replicas: int | None = None,
    replica_timeout_s: float | None = None,
) -> Flow[list[str]]:
    """Store `count` events (five encoded values each, `events.encode_event`); their ids.

    A channel at its capacity is trimmed once (acknowledged events may make room) and
    the batch tried again; `ChannelFullError` if still full. With `replicas` (default:
    the setting), `WAIT` for that many replicas in the same round trip, and
    `ReplicationError` if fewer confirmed: never a success that was not had.
    """
    settings = ctx.settings
    wanted = settings.replicas if replicas is None else replicas
    op = channel_ops.publish(k, count, parts, int(settings.dedupe_window_s * 1000))
    try:
        return (yield from _publish(ctx, op, wanted, replica_timeout_s, retry))
    except ChannelFullError:
        yield from trim_channel(ctx, k)
        return (yield from _publish(ctx, op, wanted, replica_timeout_s, retry))


def _publish(
    ctx: BaseContext, op: Op[list[str]], replicas: int, timeout_s: float | None, retry: bool
) -> Flow[list[str]]:
    if not replicas:
        return (yield from run(op, retry=retry))
    timeout = ctx.settings.replica_timeout_s if timeout_s is None else timeout_s
    ids, confirmed = yield from send([op, channel_ops.wait_replicas(replicas, timeout)],
                                     retry=retry)  # fmt: skip
    if confirmed < replicas:
        raise ReplicationError(
            f"only {confirmed} of {replicas} replica(s) confirmed within {timeout:g} s; "
            f"the event(s) may be stored on the primary but may not survive its loss",
            confirmed, tuple(ids),
        )  # fmt: skip
    return list(ids)


def publish_flat(ctx: BaseContext, k: ChannelKeys, flat: list[bytes]) -> Flow[list[str]]:
    """Store events given as one flat list of encoded values, `MAX_BATCH` per call."""
    ids: list[str] = []
    step = MAX_BATCH * PER_EVENT
    for start in range(0, len(flat), step):
        part = flat[start : start + step]
        ids += yield from publish_encoded(ctx, k, len(part) // PER_EVENT, part)
    ctx.touch(k.channel)
    return ids
