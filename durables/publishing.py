"""Publishing encoded events: one `publish.lua` call per batch, room made when full.

Flows (`ops.flows`) both clients drive."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .errors import ChannelFullError, DurablesError, ReplicationError, ServerFullError
from .events import Batch, Encoded, pack
from .ops import channels as channel_ops
from .ops import server_info as server_ops
from .ops.flows import Flow, run, send
from .retention import trim_channel
from .verdicts import FULL_ADVICE

if TYPE_CHECKING:
    from .io.context import BaseContext
    from .keys import ChannelKeys
    from .ops.base import Op

MAX_BATCH = 1000
"""Events per publish script call: big enough to amortise the round trip, small enough not to
stall the server."""


def publish_encoded(
    ctx: BaseContext,
    k: ChannelKeys,
    batch: Batch,
    *,
    retry: bool = True,
    replicas: int | None = None,
    replica_timeout_s: float | None = None,
) -> Flow[list[str]]:
    """Store the events of `batch` (at most `MAX_BATCH`); their ids.

    A channel at its capacity is trimmed once (acknowledged events may make room) and
    the batch tried again; `ChannelFullError` if still full. With `replicas` (default:
    the setting), `WAIT` for that many replicas in the same round trip, and
    `ReplicationError` if fewer confirmed: never a success that was not had. A single
    event's call names the keys of the session trip points only while the server asks
    for them (`Producer.names_trips`).
    Idempotent: the call carries a lane of the client's producer (`producers`) for its
    whole flow, so every copy the executor sends after a lost reply is stored once.
    """
    settings = ctx.settings
    wanted = settings.replicas if replicas is None else replicas
    producer = ctx.producer
    lane = producer.take()
    try:
        window = int(settings.dedupe_window_s * 1000)
        lane_id, sequence = (
            (lane.id, lane.claim(len(batch))) if settings.idempotent_publish else ("", 0)
        )
        # A batch names them always: 3 keys are little to it, and sending it twice is not.
        trips = len(batch) > 1 or producer.names_trips(k.channel)
        op = channel_ops.publish(k, batch, window, lane_id, sequence, trips=trips)
        trimmed = False
        while True:
            try:
                return (yield from _publish(ctx, op, wanted, replica_timeout_s, retry))
            except channel_ops.TripsUnnamed:  # nothing was done: again, naming them
                producer.asked_for_trips(k.channel)
                op = channel_ops.publish(k, batch, window, lane_id, sequence)
            except ChannelFullError:  # acknowledged events may make room: trim once
                if trimmed:
                    raise
                trimmed = True
                yield from trim_channel(ctx, k)
            except ServerFullError as exc:
                raise (yield from _full(exc)) from None
    finally:
        producer.give(lane)


def _full(exc: ServerFullError) -> Flow[ServerFullError]:
    """`exc` with the server's used and maximum memory (read now, if it answers)."""
    try:
        health = yield from run(server_ops.health(), retry=False)
    except DurablesError:
        return exc
    return ServerFullError(
        f"the server is full ({health.memory_text()}, maxmemory-policy {health.policy}) and "
        f"refuses to store more; {FULL_ADVICE}",
        health.used_memory,
        health.maxmemory,
    )


def _publish(
    ctx: BaseContext, op: Op[list[str]], replicas: int, timeout_s: float | None, retry: bool
) -> Flow[list[str]]:
    if not replicas:
        return (yield from run(op, retry=retry))
    timeout = ctx.settings.replica_timeout_s if timeout_s is None else timeout_s
    ids, confirmed = yield from send(
        [op, channel_ops.wait_replicas(replicas, timeout)], retry=retry
    )
    if confirmed < replicas:
        raise ReplicationError(
            f"only {confirmed} of {replicas} replica(s) confirmed within {timeout:g} s; "
            f"the event(s) may be stored on the primary but may not survive its loss",
            confirmed,
            tuple(ids),
        )
    return list(ids)


def packed(events: Iterable[Encoded]) -> list[Batch]:
    """Encoded events in batches of `MAX_BATCH`, one script call each."""
    return pack(events, MAX_BATCH)


def publish_batches(ctx: BaseContext, k: ChannelKeys, batches: list[Batch]) -> Flow[list[str]]:
    """Store packed events (`packed`), one batch after the other; all their ids."""
    ids: list[str] = []
    for batch in batches:
        ids += yield from publish_encoded(ctx, k, batch)
    ctx.touch(k.channel)
    return ids
