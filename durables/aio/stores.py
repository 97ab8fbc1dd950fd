"""The asyncio twins of the small stores: publishing, retention, dead letters, session
records and housekeeping. Each is a few `ops` calls in a row, awaited; the operations,
their parsers and the error translation are the sync client's."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ChannelFullError, ChannelNotFound, DurablesError, ReplicationError
from ..events import PER_EVENT, encode_event
from ..ops import channels as channel_ops
from ..ops import durables as durable_ops
from ..ops import housekeeping as hk_ops
from ..ops import sessions as session_ops
from ..publishing import MAX_BATCH
from ..records import DeadLetter, HousekeepReport, SessionRecord
from ..retention import DELETE_TRIES

if TYPE_CHECKING:
    from ..keys import ChannelKeys
    from ..ops.base import Op
    from .context import AsyncContext

log = logging.getLogger(__name__)

# -- publishing (as durables.publishing) ----------------------------------------------------


async def publish_encoded(
    ctx: AsyncContext,
    k: ChannelKeys,
    count: int,
    parts: Sequence[bytes],
    *,
    retry: bool = True,
    replicas: int | None = None,
    replica_timeout_s: float | None = None,
) -> list[str]:
    """Store `count` encoded events; their ids (see `durables.publishing.publish_encoded`)."""
    settings = ctx.settings
    wanted = settings.replicas if replicas is None else replicas
    op = channel_ops.publish(k, count, parts, int(settings.dedupe_window_s * 1000))
    try:
        return await _publish(ctx, op, wanted, replica_timeout_s, retry)
    except ChannelFullError:
        await trim_channel(ctx, k)
        return await _publish(ctx, op, wanted, replica_timeout_s, retry)


async def _publish(
    ctx: AsyncContext, op: Op[list[str]], replicas: int, timeout_s: float | None, retry: bool
) -> list[str]:
    if not replicas:
        return await ctx.executor.run(op, retry=retry)
    timeout = ctx.settings.replica_timeout_s if timeout_s is None else timeout_s
    ids, confirmed = await ctx.executor.run_all(
        [op, channel_ops.wait_replicas(replicas, timeout)], retry=retry
    )
    if confirmed < replicas:
        raise ReplicationError(
            f"only {confirmed} of {replicas} replica(s) confirmed within {timeout:g} s; "
            f"the event(s) may be stored on the primary but may not survive its loss",
            confirmed, tuple(ids),
        )  # fmt: skip
    return list(ids)


async def publish_flat(ctx: AsyncContext, k: ChannelKeys, flat: list[bytes]) -> list[str]:
    """Store events given as one flat list of encoded values, `MAX_BATCH` per call."""
    ids: list[str] = []
    step = MAX_BATCH * PER_EVENT
    for start in range(0, len(flat), step):
        part = flat[start : start + step]
        ids += await publish_encoded(ctx, k, len(part) // PER_EVENT, part)
    ctx.touch(k.channel)
    return ids


# -- retention (as durables.retention) --------------------------------------------------------


async def trim_channel(
    ctx: AsyncContext,
    k: ChannelKeys,
    mode: Literal["retain", "purge"] = "retain",
    up_to: str = "",
) -> int:
    exists, durables = await ctx.executor.run_all(
        [channel_ops.exists(k), channel_ops.durable_names(k)]
    )
    if not exists:
        raise ChannelNotFound(f"channel {k.channel!r} does not exist")
    return await ctx.executor.run(hk_ops.trim(k, durables, mode, up_to))


async def nack_expired(ctx: AsyncContext, k: ChannelKeys) -> int:
    return await ctx.executor.run(hk_ops.nack_expired(k))


async def reap_channel(ctx: AsyncContext, k: ChannelKeys) -> int:
    kinds = await ctx.executor.run(hk_ops.specs(k))
    ttl_ms = int(ctx.settings.orphan_ttl_s * 1000)
    names = [name for name, kind in sorted(kinds.items()) if kind != "exclusive"]
    if not names:
        return 0
    return sum(await ctx.executor.run_all([hk_ops.reap(k, name, ttl_ms) for name in names]))


async def delete_channel(ctx: AsyncContext, k: ChannelKeys) -> bool:
    for _ in range(DELETE_TRIES):
        durables = await ctx.executor.run(channel_ops.durable_names(k))
        done = await ctx.executor.run(hk_ops.delete_channel(k, durables))
        if done >= 0:
            await ctx.executor.run(hk_ops.unregister(k))
            return done == 1
    raise DurablesError(f"channel {k.channel!r} kept changing while being deleted; try again")


# -- dead letters (as durables.dead_letters) ------------------------------------------------


async def dead_letters(
    ctx: AsyncContext, k: ChannelKeys, durable: str, count: int | None
) -> list[DeadLetter]:
    return await ctx.executor.run(durable_ops.dead_letters(k, durable, count))


async def replay(ctx: AsyncContext, k: ChannelKeys, durable: str, count: int | None) -> int:
    letters = await dead_letters(ctx, k, durable, count)
    if not letters:
        return 0
    limit = ctx.settings.max_payload_bytes
    flat: list[bytes] = []
    for d in letters:
        props = json.loads(d.raw_properties) if d.raw_properties else None
        flat += encode_event(d.data, d.key, props, limit)
    await publish_flat(ctx, k, flat)
    await ctx.executor.run(durable_ops.drop_dead_letters(k, durable, [d.id for d in letters]))
    return len(letters)


# -- session records (as durables.session_store) ---------------------------------------------


async def server_ms(ctx: AsyncContext) -> int:
    return await ctx.executor.run(session_ops.server_ms())


async def load(ctx: AsyncContext, session_id: str) -> SessionRecord | None:
    return await ctx.executor.run(session_ops.load(ctx.namespace, session_id))


async def save(ctx: AsyncContext, record: SessionRecord) -> None:
    await ctx.executor.run_all(session_ops.save(ctx.namespace, record))


async def drop_interest(ctx: AsyncContext, session_id: str, channel: str) -> None:
    k = ctx.keys(channel)
    if await ctx.executor.run(session_ops.stream_exists(k, session_id)):
        await ctx.executor.run(session_ops.leave(k, session_id))


async def remove(ctx: AsyncContext, record: SessionRecord) -> None:
    for channel in record.interests:
        await drop_interest(ctx, record.id, channel)
    await ctx.executor.run_all(session_ops.forget(ctx.namespace, record.id))


async def expire(ctx: AsyncContext, record: SessionRecord, now_ms: int) -> None:
    away = (now_ms - record.away_since()) / 1000
    message = (
        f"durable client session {record.id!r} expired: disconnected for {away:.1f} s, "
        f"longer than its timeout of {record.timeout_ms / 1000:g} s; its queue is gone"
    )
    log.warning(message)
    await alert(ctx, message, now_ms, session=record.id)
    await remove(ctx, record)


async def alert(ctx: AsyncContext, message: str, now_ms: int, **about: str) -> None:
    await ctx.executor.run_all(session_ops.alert(ctx.namespace, message, now_ms, about))


async def alerts(ctx: AsyncContext, count: int = 100) -> list[dict[str, Any]]:
    return await ctx.executor.run(session_ops.alerts(ctx.namespace, count))


async def session_ids(ctx: AsyncContext) -> list[str]:
    return await ctx.executor.run(session_ops.session_ids(ctx.namespace))


async def is_live(ctx: AsyncContext, session_id: str) -> bool:
    return await ctx.executor.run(session_ops.is_live(ctx.namespace, session_id))


async def records(ctx: AsyncContext) -> list[SessionRecord]:
    found = [await load(ctx, i) for i in await session_ids(ctx)]
    return [record for record in found if record is not None]


async def reap_expired(ctx: AsyncContext) -> list[str]:
    now, gone = await server_ms(ctx), []
    for session_id in await session_ids(ctx):
        record = await load(ctx, session_id)
        if record is None:
            await ctx.executor.run(session_ops.unregister(ctx.namespace, session_id))
            continue
        if not await is_live(ctx, session_id) and record.expired(now):
            await expire(ctx, record, now)
            gone.append(session_id)
    return gone


# -- housekeeping (as durables.housekeeping) --------------------------------------------------


async def housekeep(ctx: AsyncContext) -> HousekeepReport:
    report = HousekeepReport(expired_sessions=await reap_expired(ctx))
    for channel in await ctx.executor.run(channel_ops.names(ctx.namespace)):
        k = ctx.keys(channel)
        try:
            orphans = await reap_channel(ctx, k)
            await nack_expired(ctx, k)
            removed = await trim_channel(ctx, k)
        except ChannelNotFound:
            continue
        report.channels += 1
        report.removed[channel] = removed
        if orphans:
            report.orphans[channel] = orphans
            log.warning(
                "%d events of %r were pending for consumers no durable knows; handed back",
                orphans, channel,
            )  # fmt: skip
    return report
