"""What every scenario gets: the servers of the run, sizes, and the event they all send.

Every variant sends the same event: a 200-byte payload with 3 properties. durables
stores it as fields `d` and `p` (properties as compact JSON); the raw variant
writes those same fields by hand with pre-encoded values (the client-side
ceiling); the peer sends the payload with the properties as NATS headers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis

import durables

NAMESPACE = "bench"
PAYLOAD = (b"0123456789abcdef" * 13)[:200]
PROPERTIES: dict[str, str | int] = {"region": "eu", "qty": 3, "priority": "high"}
RAW_FIELDS: dict[bytes, bytes] = {
    b"d": PAYLOAD,
    b"p": json.dumps(PROPERTIES, separators=(",", ":")).encode(),
}
HEADERS = {name: str(value) for name, value in PROPERTIES.items()}
RAW_STREAM = "raw:{bench}:s"
RAW_GROUP = "work"
PREFETCH = 100
"""Events per read for every variant: durables' default `read_batch`, the raw COUNT, the
prefetch of shared and serial consumers, and the peer's fetch batch."""


def message() -> durables.Message:
    """One event as a durables user publishes it."""
    return durables.Message(PAYLOAD, properties=PROPERTIES)


@dataclass(frozen=True)
class Env:
    """The run's servers and options; scenarios read from it, never change it."""

    redis_url: str
    nats_url: str | None
    peer_note: str
    """Why there is no peer column, when `nats_url` is None."""
    quick: bool
    rounds: int

    def size(self, full: int, quick: int) -> int:
        """`full` events in a full run, `quick` with --quick."""
        return quick if self.quick else full

    def redis(self) -> redis.Redis:
        """A plain redis-py client (hiredis parses replies when installed)."""
        return redis.Redis.from_url(self.redis_url, socket_timeout=60.0)

    def durables(self, **settings: Any) -> durables.Client:
        """A durables client with default settings unless overridden."""
        return durables.connect(self.redis_url, namespace=NAMESPACE, **settings)

    def reset(self) -> None:
        """Empty the bench server, so no variant pays for the previous one's data."""
        with self.redis() as client:
            client.flushall()
