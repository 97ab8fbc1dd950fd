"""The server side of durable client sessions: records, expiry, alerts.

A session's record lives outside every channel's hash slot and is touched with
plain commands; each interest is a consumer group (`~session:<id>`) on the
channel's stream, so a durable interest keeps queuing (and holds back retention)
while the session is away. Times are the server's, so clients on different
machines agree on expiry.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .ops import sessions as ops
from .records import Interest, SessionRecord

if TYPE_CHECKING:
    from .context import Context

log = logging.getLogger(__name__)
MAX_ALERTS = ops.MAX_ALERTS


def server_ms(ctx: Context) -> int:
    return ctx.executor.run(ops.server_ms())


def load(ctx: Context, session_id: str) -> SessionRecord | None:
    return ctx.executor.run(ops.load(ctx.namespace, session_id))


def save(ctx: Context, record: SessionRecord) -> None:
    ctx.executor.run_all(ops.save(ctx.namespace, record))


def drop_interest(ctx: Context, session_id: str, channel: str) -> None:
    """Destroy the session's group on a channel (its queue there is gone)."""
    k = ctx.keys(channel)
    if ctx.executor.run(ops.stream_exists(k, session_id)):  # else the channel was deleted
        ctx.executor.run(ops.leave(k, session_id))


def remove(ctx: Context, record: SessionRecord) -> None:
    """Forget a session: its groups, record and registry entry."""
    for channel in record.interests:
        drop_interest(ctx, record.id, channel)
    ctx.executor.run_all(ops.forget(ctx.namespace, record.id))


def expire(ctx: Context, record: SessionRecord, now_ms: int) -> None:
    """Remove a session whose timeout passed, with the seed's alert (logged and recorded)."""
    away = (now_ms - record.away_since()) / 1000
    message = (
        f"durable client session {record.id!r} expired: disconnected for {away:.1f} s, "
        f"longer than its timeout of {record.timeout_ms / 1000:g} s; its queue is gone"
    )
    log.warning(message)
    alert(ctx, message, now_ms, session=record.id)
    remove(ctx, record)


def alert(ctx: Context, message: str, now_ms: int, **about: str) -> None:
    ctx.executor.run_all(ops.alert(ctx.namespace, message, now_ms, about))


def alerts(ctx: Context, count: int = 100) -> list[dict[str, Any]]:
    """The newest alerts first."""
    return ctx.executor.run(ops.alerts(ctx.namespace, count))


def session_ids(ctx: Context) -> list[str]:
    return ctx.executor.run(ops.session_ids(ctx.namespace))


def is_live(ctx: Context, session_id: str) -> bool:
    return ctx.executor.run(ops.is_live(ctx.namespace, session_id))


def records(ctx: Context) -> list[SessionRecord]:
    """Every session's record (id, timeout, last seen, interests)."""
    found = (load(ctx, i) for i in session_ids(ctx))
    return [record for record in found if record is not None]


def reap_expired(ctx: Context) -> list[str]:
    """Remove every session whose timeout passed while nobody held it; their ids."""
    now, gone = server_ms(ctx), []
    for session_id in session_ids(ctx):
        record = load(ctx, session_id)
        if record is None:
            ctx.executor.run(ops.unregister(ctx.namespace, session_id))
            continue
        if not is_live(ctx, session_id) and record.expired(now):
            expire(ctx, record, now)
            gone.append(session_id)
    return gone


__all__ = ["Interest", "SessionRecord", "alerts", "is_live", "load", "records", "server_ms"]
