"""Operations of durable client sessions: records, leases, interests, markers, alerts;
and the delivery cursors (replay up to the marker, then live), without I/O."""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import ids, keys
from ..events import Event, SeenMessages, event_from_entry
from ..records import Interest, Nack, SessionRecord
from ..reply_parsers import streams_read
from .base import Op, as_bool, as_int, command, script, text, texts

MAX_ALERTS = 1000
CONSUMER = "c"
"""The one consumer name of a session's group: one live client reads at a time."""


def interest_matches(interest: Interest, key: str | None) -> bool:
    """Whether an event with `key` is of interest (keyless events go to ALL_KEYS only)."""
    if interest.keys is None and interest.regex is None:
        return True
    if key is None:
        return False
    if interest.keys is not None and key in interest.keys:
        return True
    return interest.regex is not None and re.fullmatch(interest.regex, key) is not None


def _about(session_id: str) -> str:
    return f"session {session_id!r}"


def _server_ms(reply: Any) -> int:
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def server_ms() -> Op[int]:
    """The server's clock in milliseconds: expiry is judged on it, by every client alike."""
    return command("TIME", parse=_server_ms, context="server time")


def take_live(ns: str, session_id: str, token: str, lease_ms: int) -> Op[int]:
    """Become (or stay, after an outage) the session's one live client, unless another is:
    0 when this client is live now, else the milliseconds the other's lease has left."""
    return script(
        "claim_lease",
        [keys.session_live(ns, session_id)],
        [token, lease_ms],
        parse=as_int,
        context=_about(session_id),
    )


@dataclass(frozen=True)
class Queue:
    """A session's queue on one channel, as `session_queue.lua` found it."""

    depth: int
    """Events queued and not yet acknowledged; -1 when the session has no queue there."""
    in_flight: int
    limit: int
    """The limit in force now; 0 when none is set."""
    dropped: int
    """Oldest events dropped by `overflow="drop_oldest"` since the last look."""
    closed: str
    """'closed:<depth>|<limit>' when an overflow closed the session's queue, else ''."""


def _queue(reply: Any) -> Queue:
    depth, pending, limit, dropped, closed = reply
    return Queue(int(depth), int(pending), int(limit), int(dropped), text(closed))


def queue(
    k: keys.ChannelKeys,
    session_id: str,
    limits: str = "",
    live: bool | None = None,
    depth: bool = True,
) -> Op[Queue]:
    """Look at (and with `limits` 'max|dmax|overflow|lease_ms', or '-' to remove, set) the
    session's queue on a channel; `live` as the client knows it. Without `depth`, a queue
    without limits reports depth 0: counting it asks for every group of the channel."""
    flag = "" if live is None else "1" if live else "0"
    return script(
        "session_queue",
        [k.stream, k.meta, k.session_trips, k.session_limits, k.overflowed],
        [session_id, limits, flag, "1" if depth else "0"],
        parse=_queue,
        context=_about(session_id),
    )


def touch(ns: str, session_id: str, token: str, lease_ms: int) -> Op[bool]:
    """The heartbeat: renew the live lease and stamp last_seen_ms with the server's clock."""
    return script(
        "touch_session",
        [keys.session_live(ns, session_id), keys.session(ns, session_id)],
        [token, lease_ms],
        parse=as_bool,
        context=_about(session_id),
    )


def release_live(ns: str, session_id: str, token: str) -> Op[bool]:
    return script(
        "release_lease",
        [keys.session_live(ns, session_id)],
        [token],
        parse=as_bool,
        context=_about(session_id),
    )


def load(ns: str, session_id: str) -> Op[SessionRecord | None]:
    def parse(raw: Any) -> SessionRecord | None:
        # without its timeout it is no record: a heartbeat's stamp of one already removed
        # (as an earlier version could leave)
        return SessionRecord.from_mapping(session_id, raw) if b"timeout_ms" in raw else None

    return command("HGETALL", keys.session(ns, session_id), parse=parse, context=_about(session_id))


def save(ns: str, record: SessionRecord) -> list[Op[Any]]:
    flat = [part for item in record.to_mapping().items() for part in item]
    # scripts, not HSET and SADD: a session resumes on a server at its maxmemory
    about = _about(record.id)
    return [
        script("save_record", [keys.session(ns, record.id)], flat, context=about),
        script("add_members", [keys.sessions(ns)], [record.id], context=about),
    ]


def join(k: keys.ChannelKeys, session_id: str) -> Op[Any]:
    """The session's group on a channel, from now on; one registered before keeps its queue."""
    return command(
        "XGROUP",
        "CREATE",
        k.stream,
        keys.session_group(session_id),
        "$",
        "MKSTREAM",
        context=_about(session_id),
        tolerate=frozenset({"BUSYGROUP"}),
    )


def stream_exists(k: keys.ChannelKeys, session_id: str) -> Op[bool]:
    return command("EXISTS", k.stream, parse=as_bool, context=_about(session_id))


def leave(k: keys.ChannelKeys, session_id: str) -> Op[Any]:
    """Destroy the session's group on a channel (its queue there is gone), with its queue
    limits there."""
    return script(
        "leave_session",
        [k.stream, k.session_trips, k.session_limits, k.unsent_nacks],
        [session_id],
        context=_about(session_id),
    )


def forget(ns: str, session_id: str) -> list[Op[Any]]:
    return [
        command("DEL", keys.session(ns, session_id), context=_about(session_id)),
        command("SREM", keys.sessions(ns), session_id, context=_about(session_id)),
    ]


def alert(ns: str, message: str, now_ms: int, about: Mapping[str, str]) -> list[Op[Any]]:
    entry = json.dumps({"time_ms": now_ms, "message": message, **about})
    return [
        command("LPUSH", keys.alerts(ns), entry, context="alerts"),
        command("LTRIM", keys.alerts(ns), 0, MAX_ALERTS - 1, context="alerts"),
    ]


def _json_list(raw: Any) -> list[dict[str, Any]]:
    return [json.loads(item) for item in raw]


def alerts(ns: str, count: int) -> Op[list[dict[str, Any]]]:
    """The newest alerts first."""
    return command("LRANGE", keys.alerts(ns), 0, count - 1, parse=_json_list, context="alerts")


def session_ids(ns: str) -> Op[list[str]]:
    return command("SMEMBERS", keys.sessions(ns), parse=texts, context="sessions")


def unregister(ns: str, session_id: str) -> Op[Any]:
    return command("SREM", keys.sessions(ns), session_id, context="sessions")


def is_live(ns: str, session_id: str) -> Op[bool]:
    return command(
        "EXISTS", keys.session_live(ns, session_id), parse=as_bool, context=_about(session_id)
    )


def place_marker(k: keys.ChannelKeys, session_id: str) -> Op[str]:
    """The newest event id of the channel now: events up to it are replay."""
    return script("place_marker", [k.stream], [], parse=text, context=_about(session_id))


def nack(k: keys.ChannelKeys, event_id: str, session_id: str, reason: str) -> Op[Any]:
    """Record that `session_id` did not acknowledge `event_id` (and take it off its queue)."""
    return script(
        "nack",
        [k.stream, k.nacks, k.unsent_nacks],
        [keys.session_group(session_id), event_id, reason],
        context=_about(session_id),
    )


def _nacks(reply: Any) -> list[Nack]:
    return [
        Nack(
            text(f.get(b"event", b"")),
            text(f.get(b"session", b"")),
            text(f.get(b"reason", b"")),
            text(i),
        )
        for i, f in reply or ()
    ]


def nacks(k: keys.ChannelKeys, count: int | None) -> Op[list[Nack]]:
    limit = () if count is None else ("COUNT", count)
    return command("XRANGE", k.nacks, "-", "+", *limit, parse=_nacks, context="nacks")


def ack(k: keys.ChannelKeys, session_id: str, event_ids: list[str]) -> Op[int]:
    return command(
        "XACK",
        k.stream,
        keys.session_group(session_id),
        *event_ids,
        parse=as_int,
        context=_about(session_id),
    )


def _entry_key(entry: Any) -> tuple[int, int]:
    """The sort key of a stream entry's id."""
    return ids.key(text(entry[0]))


@dataclass
class Batch:
    """What one read brought for one channel: events to hand out (each flagged `replayed`),
    whether the channel went live before them, and every id to acknowledge afterwards."""

    channel: str
    events: list[Event]
    done: list[Any]
    live_first: bool = False
    last: Any = None
    """The newest id the read brought (handed out, skipped or filtered)."""


class SessionCursors:
    """Where a live session stands on each interested channel: its own pending events first
    (queued while away and already read once), then new ones; the replay marker of each."""

    def __init__(
        self,
        ns: str,
        session_id: str,
        interests: Mapping[str, Interest],
        markers: Mapping[str, str],
        matches: Callable[[Interest, str | None], bool],
        *,
        batch: int,
    ) -> None:
        self.group = keys.session_group(session_id)
        self.interests = dict(interests)
        self.markers = {c: ids.key(m) for c, m in markers.items()}
        self.matches = matches
        self.batch = batch
        self.cursors = dict.fromkeys(interests, "0")  # own pending first, then '>'
        self.discarded = 0
        """Events read again after an outage that the listeners already had, or a publish
        stored twice (`SeenMessages`, one per channel: message ids are the channel's)."""
        self.seen = {c: SeenMessages() for c in interests}
        self.delivered: dict[str, tuple[int, int]] = {}
        """Per channel, the newest event handed to the listeners: after an outage the
        pending events are read again, and those are not handed out twice."""
        self._keys = {c: keys.ChannelKeys(ns, c) for c in interests}
        self._channel_of = {k.stream.encode(): c for c, k in self._keys.items()}
        self._reading: dict[str, str] = {}

    def read(self, block_ms: int) -> Op[Any]:
        """One XREADGROUP over the channels: those still replaying history alone (no block),
        else every channel, blocking for new events."""
        history = {c: cur for c, cur in self.cursors.items() if cur != ">"}
        self._reading = history or dict(self.cursors)
        streams = [self._keys[c].stream for c in self._reading]
        block = [] if history else ["BLOCK", max(1, block_ms)]
        return command(
            "XREADGROUP",
            "GROUP",
            self.group,
            CONSUMER,
            "COUNT",
            self.batch,
            *block,
            "STREAMS",
            *streams,
            *self._reading.values(),
            context="session delivery",
        )

    def on_read(self, reply: Any) -> list[Batch]:
        got = {self._channel_of[stream]: entries for stream, entries in streams_read(reply)}
        batches = []
        for channel, cursor in self._reading.items():
            entries = got.get(channel, [])
            live_first = False
            if cursor != ">":
                self.cursors[channel] = entries[-1][0].decode() if entries else ">"
            elif not entries:
                live_first = True  # caught up: nothing queued is left to replay
            events, done = self._events(channel, entries)
            last = entries[-1][0] if entries else None
            batches.append(Batch(channel, events, done, live_first, last))
        return batches

    def restart(self) -> None:
        """After an outage: read each channel's pending events again (in flight when the
        connection broke: the recovery buffer), then new ones."""
        self.cursors = dict.fromkeys(self.cursors, "0")

    def handed(self, batch: Batch) -> None:
        """The batch's events reached the listeners."""
        if batch.last is not None:
            self.delivered[batch.channel] = ids.key(text(batch.last))

    def _events(self, channel: str, entries: list[Any]) -> tuple[list[Event], list[Any]]:
        """The events to hand out, and the ids to acknowledge with the batch: all but the
        ack-required events handed out (the application acknowledges those).

        Ids ascend within a read, so the entries up to the marker (replay) and those up to
        the newest delivered before an outage (read again) are each found by bisection: a
        few ids parsed per read, not two per event."""
        interest = self.interests[channel]
        everything = interest.keys is None and interest.regex is None
        replayed = bisect_right(entries, self.markers[channel], key=_entry_key)
        seen = self.delivered.get(channel)
        again = 0 if seen is None else bisect_right(entries, seen, key=_entry_key)
        events, done = [], []
        for i, entry in enumerate(entries):
            event = event_from_entry(channel, entry)
            if event is None or not (everything or self.matches(interest, event.key)):
                done.append(entry[0])
                continue
            if self.seen[channel].duplicate(event):  # a publish stored twice
                done.append(entry[0])
                self.discarded += 1
                continue
            ack_required = event.ack_timeout_ms is not None
            if i < again:
                if not ack_required:
                    done.append(entry[0])  # delivered before the outage: not handed out twice
                    self.discarded += 1
                    continue
                event.redelivery_count = 1  # sent, never acknowledged: sent again, flagged
            event.replayed = i < replayed
            events.append(event)
            if not ack_required:
                done.append(entry[0])
        return events, done

    def ack(self, batch: Batch, extra: Sequence[str] = ()) -> Op[int] | None:
        """Acknowledge the batch (and `extra` ack-required events handled meanwhile)."""
        if not batch.done and not extra:
            return None
        return command(
            "XACK",
            self._keys[batch.channel].stream,
            self.group,
            *batch.done,
            *extra,
            parse=as_int,
            context="session delivery",
        )


# -- a session's decisions, shared by the sync and the asyncio session ----------------------


@dataclass
class Opening:
    """What opening a session does with the record found (or not) under its id."""

    resumed: bool
    record: SessionRecord
    """The record to save: the old one resumed (non-durable interests gone), or a new one."""
    expired: SessionRecord | None = None
    """An old record past its timeout: expire it (alert, remove) first."""
    dropped: tuple[str, ...] = ()
    """Channels of non-durable interests of a resumed session: their groups go."""


def opening(session_id: str, found: SessionRecord | None, now_ms: int, timeout_ms: int) -> Opening:
    """Resume `found` within its timeout, else start anew (GemFire's durable-client
    timeout); times are the server's."""
    resumed = found is not None and not found.expired(now_ms)
    if found is None or not resumed:
        plan = Opening(False, SessionRecord(session_id, timeout_ms, now_ms, now_ms), found)
    else:
        dropped = tuple(c for c, i in found.interests.items() if not i.durable)
        for channel in dropped:
            del found.interests[channel]
        plan = Opening(True, found, None, dropped)
    record = plan.record
    record.timeout_ms, record.last_seen_ms, record.disconnected_ms = timeout_ms, now_ms, 0
    return plan


def carried_over(interests: Mapping[str, Interest], record: SessionRecord) -> dict[str, Interest]:
    """After the keep-alive passed while away: the interests the new session takes on
    (Diffusion's client reconnection: "a normal new connection ... with the same topic set")."""
    return {c: i for c, i in interests.items() if i.durable or c in record.interests}


def queue_limits(max_depth: int | None, dmax: int | None, overflow: str, lease_ms: int) -> str:
    """The queue limits as `session_queue.lua` stores them, or '-' for none."""
    if max_depth is None:
        return "-"
    return f"{max_depth}|{'' if dmax is None else dmax}|{overflow}|{lease_ms}"


def overflow_notes(session_id: str, channel: str, queue: Queue) -> tuple[str | None, str | None]:
    """What an overflow did to a queue, as alerts: (events dropped, session closed)."""
    dropped = closed = None
    if queue.dropped:
        dropped = (
            f"durable client session {session_id!r} lost its {queue.dropped} "
            f"oldest queued event(s) on {channel!r}: its queue passed its "
            f"limit (overflow='drop_oldest')"
        )
    if queue.closed:
        depth, _, limit = queue.closed.removeprefix("closed:").partition("|")
        closed = (
            f"durable client session {session_id!r} was closed: its queue on "
            f"{channel!r} reached {depth} events, over its limit of {limit}; "
            f"its queue is gone"
        )
    return dropped, closed
