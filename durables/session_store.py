"""The server side of durable client sessions: records, expiry, alerts.

A session's record lives outside every channel's hash slot and is touched with
plain commands; each interest is a consumer group (`~session:<id>`) on the
channel's stream, so a durable interest keeps queuing (and holds back retention)
while the session is away. Times are the server's, so clients on different
machines agree on expiry.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import keys
from .replies import server_errors, text

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger(__name__)
MAX_ALERTS = 1000


@dataclass(frozen=True)
class Interest:
    """What a session wants from one channel."""

    channel: str
    keys: tuple[str, ...] | None = None
    """None: every key (ALL_KEYS)."""
    regex: str | None = None
    durable: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"keys": self.keys, "regex": self.regex, "durable": self.durable}

    @classmethod
    def from_dict(cls, channel: str, raw: dict[str, Any]) -> Interest:
        found = raw.get("keys")
        return cls(channel, tuple(found) if found is not None else None, raw.get("regex"),
                   bool(raw.get("durable", True)))  # fmt: skip


@dataclass
class SessionRecord:
    """A session as stored on the server."""

    id: str
    timeout_ms: int
    created_ms: int
    last_seen_ms: int
    disconnected_ms: int = 0
    """When the session was closed with keepalive; 0 while (believed) connected."""
    interests: dict[str, Interest] = field(default_factory=dict)

    def away_since(self) -> int:
        """When the session stopped being live: at a keepalive close, or its last heartbeat."""
        return self.disconnected_ms or self.last_seen_ms

    def expired(self, now_ms: int) -> bool:
        return now_ms - self.away_since() > self.timeout_ms

    def to_mapping(self) -> dict[str, str | int]:
        interests = {c: i.to_dict() for c, i in self.interests.items()}
        return {
            "timeout_ms": self.timeout_ms,
            "created_ms": self.created_ms,
            "last_seen_ms": self.last_seen_ms,
            "disconnected_ms": self.disconnected_ms,
            "interests": json.dumps(interests, separators=(",", ":")),
        }

    @classmethod
    def from_mapping(cls, session_id: str, raw: Any) -> SessionRecord:
        interests = json.loads(raw.get(b"interests", b"{}"))
        return cls(
            id=session_id,
            timeout_ms=int(raw[b"timeout_ms"]),
            created_ms=int(raw[b"created_ms"]),
            last_seen_ms=int(raw[b"last_seen_ms"]),
            disconnected_ms=int(raw.get(b"disconnected_ms", b"0")),
            interests={c: Interest.from_dict(c, i) for c, i in interests.items()},
        )


def server_ms(client: Client) -> int:
    seconds, micros = client.redis.time()
    return int(seconds) * 1000 + int(micros) // 1000


def load(client: Client, session_id: str) -> SessionRecord | None:
    with server_errors(f"session {session_id!r}"):
        raw = client.redis.hgetall(keys.session(client.namespace, session_id))
    return SessionRecord.from_mapping(session_id, raw) if raw else None


def save(client: Client, record: SessionRecord) -> None:
    ns = client.namespace
    pipe = client.redis.pipeline(transaction=False)
    pipe.hset(keys.session(ns, record.id), mapping=record.to_mapping())  # type: ignore[arg-type]
    pipe.sadd(keys.sessions(ns), record.id)
    with server_errors(f"session {record.id!r}"):
        pipe.execute()


def drop_interest(client: Client, session_id: str, channel: str) -> None:
    """Destroy the session's group on a channel (its queue there is gone)."""
    stream = client.keys(channel).stream
    with server_errors(f"session {session_id!r}"):
        if client.redis.exists(stream):  # else the channel itself was deleted meanwhile
            client.redis.xgroup_destroy(stream, keys.session_group(session_id))


def remove(client: Client, record: SessionRecord) -> None:
    """Forget a session: its groups, record and registry entry."""
    for channel in record.interests:
        drop_interest(client, record.id, channel)
    ns = client.namespace
    pipe = client.redis.pipeline(transaction=False)
    pipe.delete(keys.session(ns, record.id))
    pipe.srem(keys.sessions(ns), record.id)
    with server_errors(f"session {record.id!r}"):
        pipe.execute()


def expire(client: Client, record: SessionRecord, now_ms: int) -> None:
    """Remove a session whose timeout passed, with the seed's alert (logged and recorded)."""
    away = (now_ms - record.away_since()) / 1000
    message = (
        f"durable client session {record.id!r} expired: disconnected for {away:.1f} s, "
        f"longer than its timeout of {record.timeout_ms / 1000:g} s; its queue is gone"
    )
    log.warning(message)
    alert(client, message, now_ms, session=record.id)
    remove(client, record)


def alert(client: Client, message: str, now_ms: int, **about: str) -> None:
    entry = json.dumps({"time_ms": now_ms, "message": message, **about})
    pipe = client.redis.pipeline(transaction=False)
    pipe.lpush(keys.alerts(client.namespace), entry)
    pipe.ltrim(keys.alerts(client.namespace), 0, MAX_ALERTS - 1)
    with server_errors("alerts"):
        pipe.execute()


def alerts(client: Client, count: int = 100) -> list[dict[str, Any]]:
    """The newest alerts first."""
    with server_errors("alerts"):
        raw = client.redis.lrange(keys.alerts(client.namespace), 0, count - 1)
    return [json.loads(item) for item in raw]


def session_ids(client: Client) -> list[str]:
    with server_errors("sessions"):
        return sorted(text(i) for i in client.redis.smembers(keys.sessions(client.namespace)))


def is_live(client: Client, session_id: str) -> bool:
    with server_errors(f"session {session_id!r}"):
        return bool(client.redis.exists(keys.session_live(client.namespace, session_id)))


def reap_expired(client: Client) -> list[str]:
    """Remove every session whose timeout passed while nobody held it; their ids."""
    now, gone = server_ms(client), []
    for session_id in session_ids(client):
        record = load(client, session_id)
        if record is None:
            with server_errors("sessions"):
                client.redis.srem(keys.sessions(client.namespace), session_id)
            continue
        if not is_live(client, session_id) and record.expired(now):
            expire(client, record, now)
            gone.append(session_id)
    return gone
