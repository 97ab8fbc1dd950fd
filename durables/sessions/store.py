"""The server side of durable client sessions: records, expiry, alerts.

A session's record lives outside every channel's hash slot and is touched with
plain commands; each interest is a consumer group (`~session:<id>`) on the
channel's stream, so a durable interest keeps queuing (and holds back retention)
while the session is away. Times are the server's, so clients on different
machines agree on expiry. Flows (`ops.flows`) both clients drive.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..errors import ServerFullError
from ..ops import sessions as ops
from ..ops.flows import Flow, run, send
from ..records import Interest, SessionRecord

if TYPE_CHECKING:
    from ..io.context import BaseContext

log = logging.getLogger(__name__)
MAX_ALERTS = ops.MAX_ALERTS


def server_ms(ctx: BaseContext) -> Flow[int]:
    return (yield from run(ops.server_ms()))


def load(ctx: BaseContext, session_id: str) -> Flow[SessionRecord | None]:
    return (yield from run(ops.load(ctx.namespace, session_id)))


def save(ctx: BaseContext, record: SessionRecord) -> Flow[None]:
    yield from send(ops.save(ctx.namespace, record))


def drop_interest(ctx: BaseContext, session_id: str, channel: str) -> Flow[None]:
    """Destroy the session's group on a channel (its queue there is gone)."""
    k = ctx.keys(channel)
    if (yield from run(ops.stream_exists(k, session_id))):  # else the channel was deleted
        yield from run(ops.leave(k, session_id))


def remove(ctx: BaseContext, record: SessionRecord) -> Flow[None]:
    """Forget a session: its groups, record and registry entry."""
    for channel in record.interests:
        yield from drop_interest(ctx, record.id, channel)
    yield from send(ops.forget(ctx.namespace, record.id))


def expire(ctx: BaseContext, record: SessionRecord, now_ms: int) -> Flow[None]:
    """Remove a session whose timeout passed, with the seed's alert (logged and recorded)."""
    away = (now_ms - record.away_since()) / 1000
    message = (
        f"durable client session {record.id!r} expired: disconnected for {away:.1f} s, "
        f"longer than its timeout of {record.timeout_ms / 1000:g} s; its queue is gone"
    )
    log.warning(message)
    yield from alert(ctx, message, now_ms, session=record.id)
    yield from remove(ctx, record)


def discard(ctx: BaseContext, session_id: str, by: str) -> Flow[bool]:
    """Close a session from outside (an operator): its queue and interests go, with an
    alert naming `by`; a client that resumes the id gets a new session. False: none."""
    record = yield from load(ctx, session_id)
    if record is None:
        return False
    message = f"durable client session {session_id!r} was closed by {by}; its queue is gone"
    log.warning(message)
    yield from alert(ctx, message, (yield from server_ms(ctx)), session=session_id)
    yield from remove(ctx, record)
    return True


def alert(ctx: BaseContext, message: str, now_ms: int, **about: str) -> Flow[None]:
    """Keep an alert for `durables sessions` and the console; on a server at its maxmemory
    it cannot be kept, and is logged instead (housekeeping goes on: it frees memory)."""
    try:
        yield from send(ops.alert(ctx.namespace, message, now_ms, about))
    except ServerFullError:
        log.warning("not kept, the server is full: %s", message)


def warn(ctx: BaseContext, message: str, session_id: str) -> Flow[None]:
    """A warning about a session, logged and recorded as an alert (`durables sessions`)."""
    log.warning(message)
    now = yield from server_ms(ctx)
    yield from alert(ctx, message, now, session=session_id)


def looking(
    ctx: BaseContext,
    record: SessionRecord,
    limits: str = "",
    live: bool | None = None,
    depth: bool = False,
) -> Flow[tuple[list[ops.Queue], str | None]]:
    """Each of a session's queues (`ops.queue`: `limits` set when given, `live` as its client
    knows it), events an overflow dropped alerted; and what says an overflow closed the
    session, if one did."""
    channels = list(record.interests)
    found = yield from send(
        [ops.queue(ctx.keys(c), record.id, limits, live, depth) for c in channels]
    )
    closed_by = None
    for channel, queue in zip(channels, found, strict=True):
        dropped, closed = ops.overflow_notes(record.id, channel, queue)
        if dropped:
            yield from warn(ctx, dropped, record.id)
        closed_by = closed_by or closed
    return list(found), closed_by


def closed_while_away(ctx: BaseContext, record: SessionRecord) -> Flow[bool]:
    """Whether an overflow closed a session while it was away: then it is removed, with an
    alert, as a session whose timeout passed (opening it again starts anew)."""
    if not record.interests:
        return False
    _, closed = yield from looking(ctx, record)
    if closed is None:
        return False
    yield from warn(ctx, f"{closed}; opening it again starts anew", record.id)
    yield from remove(ctx, record)
    return True


def alerts(ctx: BaseContext, count: int = 100) -> Flow[list[dict[str, Any]]]:
    """The newest alerts first."""
    return (yield from run(ops.alerts(ctx.namespace, count)))


def session_ids(ctx: BaseContext) -> Flow[list[str]]:
    return (yield from run(ops.session_ids(ctx.namespace)))


def is_live(ctx: BaseContext, session_id: str) -> Flow[bool]:
    return (yield from run(ops.is_live(ctx.namespace, session_id)))


def records(ctx: BaseContext) -> Flow[list[SessionRecord]]:
    """Every session's record (id, timeout, last seen, interests)."""
    found = []
    for session_id in (yield from session_ids(ctx)):
        record = yield from load(ctx, session_id)
        if record is not None:
            found.append(record)
    return found


def reap(ctx: BaseContext) -> Flow[tuple[list[str], list[str]]]:
    """Remove every session nobody holds whose timeout passed, or that an overflow closed
    while it was away (each with an alert); the ids of each."""
    now = yield from server_ms(ctx)
    expired, closed = [], []
    for session_id in (yield from session_ids(ctx)):
        record = yield from load(ctx, session_id)
        if record is None:
            yield from run(ops.unregister(ctx.namespace, session_id))
            continue
        if (yield from is_live(ctx, session_id)):
            continue  # its client finds out itself
        if record.expired(now):
            yield from expire(ctx, record, now)
            expired.append(session_id)
        elif (yield from closed_while_away(ctx, record)):
            closed.append(session_id)
    return expired, closed


__all__ = [
    "Interest",
    "SessionRecord",
    "alerts",
    "closed_while_away",
    "is_live",
    "load",
    "looking",
    "reap",
    "records",
    "server_ms",
    "warn",
]
