"""What an operator looks at, in one read: the server, each channel with its durables,
each session with its queue, and the newest alerts.

The figures `durables.metrics` exports and a few more a console shows beside them:
the stream's counters (events ever added, so a rate in), the durables' consumers
with their windows, the oldest unacknowledged age, a session's queue limits and its
keep-alive left. A flow (`ops.flows`), so either client drives it; it only reads.
A channel or durable deleted meanwhile is left out.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .attachments import ConsumerFigures, KeyFigures, attached, key_figures, scores
from .channel import ChannelCore, channel_infos
from .errors import ChannelNotFoundError, DurableNotFoundError
from .ids import key as id_key
from .keys import session_group
from .ops import channels as channel_ops
from .ops.base import Op, command, same, script
from .ops.durables import Planned, count_matching, planned_after
from .ops.flows import Flow, run, send
from .records import ChannelInfo, DurableInfo, SessionRecord
from .reply_parsers import text
from .sessions import store as session_store

if TYPE_CHECKING:
    from .io.context import BaseContext
    from .keys import ChannelKeys


@dataclass(frozen=True)
class DurableFigures:
    """One durable now."""

    info: DurableInfo
    """Kind, filter, depth, transaction depth and the attached consumers (for an exclusive
    durable: its holder, if any)."""
    lag: int | None
    """Entries its consumer group has not read yet (None: the server cannot tell)."""
    oldest_unacked_age_s: float
    """Age of its oldest event not acknowledged, handed out or not (by its publish time,
    on the server's clock); 0 when it has acknowledged everything."""
    dead_letters: int
    windows: dict[str, int] = field(default_factory=dict)
    """Shared and serial durables: each attached consumer's window."""
    acknowledged: int | None = None
    """Events its group read and no longer holds pending: a counter, for a rate out."""
    delivered: int | None = None
    """Events its group ever read (the server's `entries-read`): a counter."""
    redelivered_pending: int = 0
    """Pending events that were delivered before (redelivery count above zero)."""
    dead_lettered: int = 0
    """Events ever moved to its dead letters (the dead-letter stream's entries-added): a
    counter."""
    consumers: list[ConsumerFigures] = field(default_factory=list)
    redelivered: int = 0
    """Events ever handed out again (rolled back, or back from a consumer that left or
    lapsed, or inherited by a new exclusive holder): a counter the scripts keep."""
    """The attached consumers with their host, pid, window, held events, last seen and
    lease left."""
    keys: KeyFigures | None = None
    """Keyed durables: keys out per consumer, moving to a new owner, handed back."""


@dataclass(frozen=True)
class ChannelFigures:
    """One channel now."""

    info: ChannelInfo
    added: int
    """Events ever added to the stream (it only grows): a counter, for a rate in."""
    retained_bytes: int | None
    """What the stream takes in the server's memory (None: the server would not say)."""
    durables: list[DurableFigures]
    counters: dict[str, int] = field(default_factory=dict)
    """What the channel's scripts counted (counters): 'duplicates' (publishes not stored
    again), 'dropped:capacity', 'dropped:ttl', 'dropped:purge' (events removed before
    every durable acknowledged them)."""
    first_ms: int | None = None
    """When its oldest retained event was published (None: it holds none)."""
    retained_by: str | None = None
    """What holds its oldest unacknowledged event back: 'durable <name>' or 'session <id>'
    (None: every durable and session acknowledged everything)."""


@dataclass(frozen=True)
class SessionFigures:
    """One durable client session now."""

    record: SessionRecord
    live: bool
    queue_depth: int
    """Events queued for the session and not yet acknowledged, over its channels."""
    max_depth: int | None
    """Its queue limit while connected (None: no limit)."""
    disconnected_max_depth: int | None
    """Its queue limit while away, when larger."""
    keepalive_left_s: float | None
    """While away: seconds until it expires; None while live."""
    state: str = "live"
    """'live', 'away' (within its keep-alive) or 'expired' (past it, even before
    housekeeping discards it)."""


@dataclass(frozen=True)
class Figures:
    """The namespace at one moment, on the server's clock."""

    server_ms: int
    server: dict[str, object]
    """`INFO server`, `memory`, `persistence` and `replication` fields (version, uptime,
    used memory, ...); `server_health.parse_health` reads them."""
    channels: list[ChannelFigures]
    sessions: list[SessionFigures]
    alerts: list[dict[str, Any]]


def read_figures(ctx: BaseContext, alert_count: int = 20, only: str | None = None) -> Flow[Figures]:
    """Read everything at once: a few round trips per channel, none per event. With
    `only` (a channel's name), that channel alone (and no session)."""
    sections = yield from send(
        [
            command("INFO", section, parse=dict)
            for section in ("server", "memory", "persistence", "replication")
        ]
    )
    now_ms = yield from session_store.server_ms(ctx)
    names = [only] if only else (yield from run(channel_ops.names(ctx.namespace)))
    channels: list[ChannelFigures] = []
    groups: dict[str, list[dict[str, Any]]] = {}
    for channel in (yield from _channel_infos(ctx, names)):
        try:
            found = yield from ChannelCore(ctx, channel.name).listing_durables()
        except (ChannelNotFoundError, DurableNotFoundError):
            continue
        figures, groups[channel.name] = yield from _channel(ctx, channel, found, now_ms)
        channels.append(figures)
    sessions = []
    for record in [] if only else (yield from session_store.records(ctx)):
        sessions.append((yield from _session(ctx, record, groups, now_ms)))
    alerts = (yield from session_store.alerts(ctx, alert_count)) if alert_count else []
    server: dict[str, object] = {}
    for section in sections:
        server.update(section)
    return Figures(now_ms, server, channels, sessions, alerts)


def _channel_infos(ctx: BaseContext, names: Sequence[str]) -> Flow[list[ChannelInfo]]:
    """The channels' infos in one round trip; one by one (leaving out those gone) when a
    channel was deleted between the listing and this read."""
    try:
        return (yield from channel_infos(ctx, names))
    except ChannelNotFoundError:
        found = []
        for name in names:
            with contextlib.suppress(ChannelNotFoundError):
                found += yield from channel_infos(ctx, [name])
        return found


def _channel(
    ctx: BaseContext, channel: ChannelInfo, found: Sequence[DurableInfo], now_ms: int
) -> Flow[tuple[ChannelFigures, list[dict[str, Any]]]]:
    k = ctx.keys(channel.name)
    ops: list[Op[Any]] = [
        _stream(k),
        _memory(k.stream),
        _groups(k),
        command("HMGET", k.meta, *COUNTERS, parse=_counters),
    ]
    for d in found:
        ops += [
            command("XPENDING", k.stream, d.name, parse=same, tolerate=_GONE),
            command("XINFO STREAM", k.dead(d.name), parse=_dict_or_empty, tolerate=_GONE),
            command("HGETALL", k.members(d.name), parse=_windows),
            command("HGETALL", k.planned(d.name), parse=same),
            command("HLEN", k.redeliveries(d.name), parse=int),
            command("XINFO CONSUMERS", k.stream, d.name, parse=_list_or_empty, tolerate=_GONE),
            command("ZRANGE", k.alive(d.name), 0, -1, "WITHSCORES", parse=scores),
            command("PTTL", k.lease(d.name), parse=int),
            command("HGET", k.tally(d.name), "redelivered", parse=_int_or_zero),
        ]
    replies = yield from send(ops)
    stream, retained, groups, counters = replies[:4]
    present = []
    for n, d in enumerate(found):
        group = next((g for g in groups if text(g["name"]) == d.name), None)
        if group is not None:  # else deleted meanwhile
            present.append((d, group, *replies[4 + PER_DURABLE * n : 4 + PER_DURABLE * (n + 1)]))
    positions = [planned_after(p[5], text(p[1]["last-delivered-id"])) for p in present]
    reads: list[Op[Any]] = [
        _first_after(k, planned.last or text(p[1]["last-delivered-id"]))
        for p, planned in zip(present, positions, strict=True)
    ]
    sessions = [g for g in groups if text(g["name"]).startswith(SESSION_GROUP)]
    reads += [_first_after(k, text(g["last-delivered-id"])) for g in sessions]
    reads += [
        command("XPENDING", k.stream, text(g["name"]), parse=same, tolerate=_GONE) for g in sessions
    ]
    keyed = [p[0].name for p in present if p[0].kind == "keyed"]
    reads += [  # who holds each event out: a keyed durable holds one per key at most
        script("key_holders", [k.stream, k.holds(name)], [name, KEYED_PENDING_READ],
               parse=_pairs, context=f"keys of {name!r}")
        for name in keyed
    ]  # fmt: skip
    replies = (yield from send(reads)) if reads else []
    firsts = replies[: len(present)]
    n = len(sessions)
    pendings = dict(zip(keyed, replies[len(present) + 2 * n :], strict=True))
    durables, added = [], int(stream.get("entries-added") or 0)
    holders: list[tuple[tuple[int, int], str]] = []
    for (
        d,
        group,
        pending,
        dead,
        windows,
        _,
        redelivered,
        found_consumers,
        alive,
        lease_ms,
        again,
    ), planned, first in zip(present, positions, firsts, strict=True):
        oldest_id = _oldest_id(pending, planned, first)
        if oldest_id is not None:
            holders.append((id_key(oldest_id), f"durable {d.name}"))
        keys = None
        if d.name in pendings:
            keys = key_figures(pendings[d.name], list(d.consumers))
        durables.append(
            DurableFigures(
                d,
                _lag(group, planned),
                _age_s(oldest_id, now_ms),
                int(dead.get("length") or 0),
                windows if d.kind != "exclusive" else {},
                _acknowledged(group, added),
                _delivered(group, added),
                int(redelivered),
                int(dead.get("entries-added") or 0),
                attached(d, windows, found_consumers, alive, lease_ms, now_ms, keys),
                again,
                keys,
            )
        )
    tail = replies[len(present) :]
    for g, first, pending in zip(sessions, tail[:n], tail[n : 2 * n], strict=True):
        oldest_id = _oldest_id(pending, None, first)
        if oldest_id is not None:
            holders.append((id_key(oldest_id), f"session {text(g['name'])[len(SESSION_GROUP) :]}"))
    oldest = stream.get("first-entry")
    first_ms = id_key(text(oldest[0]))[0] if oldest else None
    return ChannelFigures(
        channel, added, retained, durables, counters, first_ms, min(holders)[1] if holders else None
    ), groups


PER_DURABLE = 9
"""Replies read per durable in a channel's first round trip."""
KEYED_PENDING_READ = 10_000
"""A keyed durable's pending entries read to see who holds which key: its windows and
the events waiting in its pool (a hot key's look-ahead holds up to 1,000 more)."""


SESSION_GROUP = session_group("")
"""The prefix of a session's consumer group name."""


COUNTERS = ("duplicates", "dropped:capacity", "dropped:ttl", "dropped:purge")
"""The counters the channel's scripts keep in its meta hash."""


def _counters(reply: Any) -> dict[str, int]:
    return {name: int(value or 0) for name, value in zip(COUNTERS, reply or (), strict=False)}


def _first_after(k: ChannelKeys, position: str) -> Op[str | None]:
    """The id of the first event after `position`: the oldest a durable was not handed."""
    return command(
        "XRANGE", k.stream, "(" + position, "+", "COUNT", 1, parse=_first_id, tolerate=_GONE
    )


def _first_id(reply: Any) -> str | None:
    return text(reply[0][0]) if isinstance(reply, list) and reply else None


def _delivered(group: dict[str, Any], added: int) -> int | None:
    """Events the group ever read: its entries-read, or (a group placed with an id, whose
    count the server does not keep) the events ever added less those it has not read."""
    read_count = group.get("entries-read")
    if read_count is not None:
        return int(read_count)
    lag = group.get("lag")
    return None if lag is None else max(0, added - int(lag))


_GONE = frozenset({"NOGROUP", "no"})
"""No stream yet (a channel nothing was published to: `no such key`), or a group gone
between the listing and this read: no figure, not an error."""


def _stream(k: ChannelKeys) -> Op[dict[str, Any]]:
    return command("XINFO STREAM", k.stream, parse=_dict_or_empty, tolerate=_GONE)


def _memory(key: str) -> Op[int | None]:
    """`MEMORY USAGE` (refused to some ACL users, or gone meanwhile: None)."""
    return command("MEMORY USAGE", key, parse=_int_or_none, tolerate=frozenset({"NOPERM"}))


def _groups(k: ChannelKeys) -> Op[list[dict[str, Any]]]:
    return command("XINFO GROUPS", k.stream, parse=_list_or_empty, tolerate=_GONE)


def _dict_or_empty(reply: Any) -> dict[str, Any]:
    return reply if isinstance(reply, dict) else {}


def _list_or_empty(reply: Any) -> list[dict[str, Any]]:
    return list(reply) if isinstance(reply, list) else []


def _int_or_zero(reply: Any) -> int:
    return int(reply) if reply else 0


def _int_or_none(reply: Any) -> int | None:
    return int(reply) if isinstance(reply, int) else None


def _pairs(reply: Any) -> dict[str, str]:
    """A flat list key, value, ... as a dict."""
    items = [text(item) for item in reply or ()]
    return dict(zip(items[::2], items[1::2], strict=True))


def _windows(reply: Any) -> dict[str, int]:
    """The members hash: consumer id -> its attachment as JSON, window under `w`."""
    found = {}
    for name, raw in (reply or {}).items():
        window = json.loads(raw).get("w") if raw.startswith(b"{") else raw
        found[text(name)] = int(window or 0)
    return found


def _lag(group: dict[str, Any], planned: Planned | None = None) -> int | None:
    """Entries not read yet; those a Spark query planned are read (handed out)."""
    lag = group.get("lag")
    if lag is None:
        return None
    return max(0, int(lag) - (planned.events if planned else 0))


def _acknowledged(group: dict[str, Any], added: int | None = None) -> int | None:
    """Events the group read and no longer holds pending."""
    read_count = group.get("entries-read") if added is None else _delivered(group, added)
    return None if read_count is None else max(0, int(read_count) - int(group["pending"]))


def _oldest_id(pending: Any, planned: Planned | None, first: str | None) -> str | None:
    """The oldest unacknowledged event's id: the oldest pending one of an `XPENDING`
    summary, of a batch a Spark query planned, or the first one not handed out yet
    (`first`), whichever is older; None when there is none."""
    oldest = [i for i in (planned.first if planned else None, first) if i]
    if isinstance(pending, dict) and pending.get("pending") and pending.get("min") is not None:
        oldest.append(text(pending["min"]))
    return min(oldest, key=id_key) if oldest else None


def _age_s(oldest_id: str | None, now_ms: int) -> float:
    """Seconds since the event `oldest_id` was published (0: none)."""
    return 0.0 if oldest_id is None else max(0, now_ms - id_key(oldest_id)[0]) / 1000


def _session(
    ctx: BaseContext,
    record: SessionRecord,
    groups: dict[str, list[dict[str, Any]]],
    now_ms: int,
) -> Flow[SessionFigures]:
    """A session's queue: its group's lag and pending on each channel it is interested in,
    and its limits as the channels store them (`max|dmax|overflow|...`)."""
    live = yield from session_store.is_live(ctx, record.id)
    name = session_group(record.id)
    depth = 0
    limits: list[str] = []
    for channel in record.interests:
        group = next((g for g in groups.get(channel, ()) if text(g["name"]) == name), None)
        if group is not None:
            depth += int(group["pending"]) + (yield from _unread(ctx, channel, group))
        stored = yield from run(
            command("HGET", ctx.keys(channel).session_limits, record.id, parse=same)
        )
        if stored:
            limits.append(text(stored))
    max_depth, dmax = _limits(limits)
    left = None if live else max(0.0, (record.away_since() + record.timeout_ms - now_ms) / 1000)
    state = "live" if live else "expired" if record.expired(now_ms) else "away"
    return SessionFigures(record, live, depth, max_depth, dmax, left, state)


def _unread(ctx: BaseContext, channel: str, group: dict[str, Any]) -> Flow[int]:
    """A group's lag, counted by the server in slices when it does not know it (after an
    `XGROUP SETID` without `ENTRIESREAD`)."""
    lag = _lag(group)
    if lag is not None:
        return lag
    k, position, count = ctx.keys(channel), text(group["last-delivered-id"]), 0
    while position:
        found, position = yield from run(
            count_matching(k, text(group["name"]), ANY_EVENT, position)
        )
        count += found
    return count


ANY_EVENT = json.dumps(["lit", True])
"""The syntax tree of a filter every event matches."""


def _limits(stored: list[str]) -> tuple[int | None, int | None]:
    for value in stored:
        max_depth, _, rest = value.partition("|")
        dmax = rest.partition("|")[0]
        if max_depth.isdigit():
            return int(max_depth), int(dmax) if dmax.isdigit() else None
    return None, None


__all__ = [
    "ChannelFigures",
    "DurableFigures",
    "Figures",
    "SessionFigures",
    "read_figures",
]
