"""The typed records that operations return: channels, durables, sessions, dead letters.

Plain data, no I/O: parsers in `durables.ops` build them from replies, and the
public fronts (`Channel.info()`, `Durable.info()`, `client.sessions()`) hand them out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

Kind = Literal["exclusive", "shared", "serial", "keyed"]
KINDS: tuple[str, ...] = get_args(Kind)
FullPolicy = Literal["reject", "drop_oldest"]


@dataclass(frozen=True)
class ChannelInfo:
    """A channel's state at one moment."""

    name: str
    length: int
    first_id: str | None
    last_id: str | None
    durables: tuple[str, ...]
    ttl_s: float | None = None
    capacity: int | None = None
    full: FullPolicy = "reject"
    keyed: bool = False


@dataclass(frozen=True)
class DurableSpec:
    """What defines a durable; stored as JSON beside the consumer group."""

    kind: Kind
    filter: str | None
    start: str
    created_ms: int
    max_deliveries: int | None = None
    """Deliveries after which a rolled-back event goes to the dead letters (shared, serial)."""
    ast: list[object] | None = None
    """The filter's syntax tree, for the dispatcher's Lua evaluator."""

    def to_json(self) -> str:
        return json.dumps(self.__dict__, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: bytes | str) -> DurableSpec:
        return cls(**json.loads(raw))


@dataclass(frozen=True)
class DurableInfo:
    """A durable's state at one moment."""

    channel: str
    name: str
    kind: Kind
    filter: str | None
    start: str
    depth: int
    transaction_depth: int
    last_delivered_id: str
    consumers: tuple[str, ...]


@dataclass(frozen=True)
class DeadLetter:
    """An event a durable stopped redelivering, and why."""

    id: str
    origin_id: str
    data: bytes
    key: str | None
    raw_properties: bytes | None
    reason: str
    deliveries: int

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")


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
        return cls(
            channel,
            tuple(found) if found is not None else None,
            raw.get("regex"),
            bool(raw.get("durable", True)),
        )


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


@dataclass(frozen=True)
class SessionInfo:
    """A live session's state and queue at one moment."""

    id: str
    state: str
    depth: int
    """Events queued for the session and not yet acknowledged, over all its channels."""
    queue_limit: int | None
    """The most it may hold now (None: no limit)."""
    timeout_s: float
    in_flight: int
    """Of `depth`, those sent to this client and not yet acknowledged."""


@dataclass(frozen=True)
class Nack:
    """An ack-required event that a session did not acknowledge: `reason` is 'timeout'
    (sent, not acknowledged in time) or 'expired_before_sent' (never sent)."""

    event_id: str
    session_id: str
    reason: str
    id: str = ""
    """The nack's own id in the channel's nack stream (when it was recorded)."""


@dataclass(frozen=True)
class AuditEntry:
    """One admin action as the audit log keeps it."""

    id: str
    time_ms: int
    """When it was recorded, on the server's clock."""
    action: str
    """What was done: 'delete-durable', 'purge', ..."""
    target: str
    """On what: 'channel orders', 'durable orders/billing', 'session mobile-42'."""
    address: str
    """From where: the console's client address, or the CLI's user@host."""
    outcome: str
    """What came of it, as the tool reported it."""


@dataclass
class HousekeepReport:
    """What one round of housekeeping did."""

    channels: int = 0
    removed: dict[str, int] = field(default_factory=dict)
    expired_sessions: list[str] = field(default_factory=list)
    closed_sessions: list[str] = field(default_factory=list)
    """Sessions removed because an overflow closed them while they were away."""
    orphans: dict[str, int] = field(default_factory=dict)
    """Per channel: events handed back from consumers no durable knows (`orphan_ttl_s`)."""

    @property
    def total_removed(self) -> int:
        return sum(self.removed.values())


__all__ = [
    "KINDS",
    "AuditEntry",
    "ChannelInfo",
    "DeadLetter",
    "DurableInfo",
    "DurableSpec",
    "FullPolicy",
    "HousekeepReport",
    "Interest",
    "Kind",
    "Nack",
    "SessionInfo",
    "SessionRecord",
]
