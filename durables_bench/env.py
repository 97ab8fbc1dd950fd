"""What every scenario gets: the servers of the run, sizes, and the event they all send.

Every variant sends the same event: a 200-byte payload with 3 properties. durables
stores it as fields `d` and `p` (properties as compact JSON); the raw variant
writes those same fields by hand with pre-encoded values (the client-side
ceiling); the peer sends the payload with the properties as NATS headers.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from redis.typing import EncodableT, FieldT

import durables
from durables import memory

from .results import Rate, Variant

NAMESPACE = "bench"
PAYLOAD = (b"0123456789abcdef" * 13)[:200]
PROPERTIES: dict[str, str | int] = {"region": "eu", "qty": 3, "priority": "high"}
RAW_FIELDS: dict[FieldT, EncodableT] = {
    b"d": PAYLOAD,
    b"p": json.dumps(PROPERTIES, separators=(",", ":")).encode(),
}
HEADERS = {name: str(value) for name, value in PROPERTIES.items()}
RAW_STREAM = "raw:{bench}:s"
RAW_GROUP = "work"
PREFETCH = 100
"""Events per read for every variant: durables' default `read_batch`, the raw COUNT, the
prefetch of shared and serial consumers, and the peer's fetch batch."""


def at_least_one(text: str) -> int:
    """An argparse type for a count of events or rounds: a whole number, 1 or more."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def xadd_batches(r: redis.Redis, sizes: list[int]) -> int:
    """The raw client's publishing: one pipeline of plain XADDs per batch; returns the total."""
    for size in sizes:
        pipe = r.pipeline(transaction=False)
        for _ in range(size):
            pipe.xadd(RAW_STREAM, RAW_FIELDS)
        pipe.execute()
    return sum(sizes)


KEYS = 1_000
"""Distinct event keys in the keyed scenarios: orders, say, each with a few events."""


def message(key: str | None = None) -> durables.Message:
    """One event as a durables user publishes it (with `key` on a keyed durable's channel)."""
    return durables.Message(PAYLOAD, key=key, properties=PROPERTIES)


@dataclass(frozen=True)
class Env:
    """The run's servers and options; scenarios read from it, never change it."""

    redis_url: str
    nats_url: str | None
    peer_note: str
    """Why there is no peer column, when `nats_url` is None."""
    quick: bool
    rounds: int
    nats_pid: int | None = None
    """The nats-server process, whose CPU time /proc tells."""
    durables_url: str | None = None
    """Where the durables variant runs, when not on the bench server (`memory://...`)."""

    def size(self, full: int, quick: int) -> int:
        """`full` events in a full run, `quick` with --quick."""
        return quick if self.quick else full

    def redis(self) -> redis.Redis:
        """A plain redis-py client (hiredis parses replies when installed)."""
        return redis.Redis.from_url(self.redis_url, socket_timeout=60.0)

    def durables(self, **settings: Any) -> durables.Client:
        """A durables client with default settings unless overridden."""
        url = self.durables_url or self.redis_url
        return durables.connect(url, namespace=NAMESPACE, **settings)

    @contextlib.contextmanager
    def on_memory(self) -> Iterator[Env]:
        """This run with the durables variant on a `memory://` store of its own, dropped
        after: the library in this process, on fakeredis, with no server in between."""
        name = f"bench-{uuid.uuid4().hex[:8]}"
        try:
            yield dataclasses.replace(self, durables_url=f"memory://{name}")
        finally:
            memory.drop(name)

    def server_cpu_s(self, variant: Variant) -> float | None:
        """CPU seconds the variant's server has used so far (None if it cannot be read)."""
        if variant == "peer":
            return _process_cpu_s(self.nats_pid)
        if variant == "durables" and self.durables_url:
            return None  # memory://: the library's process is the server
        with self.redis() as client:
            cpu = client.info("cpu")
        return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])

    def meter(self, variant: Variant) -> Meter:
        """Start timing a variant's measured section: wall time and server CPU."""
        return Meter(functools.partial(self.server_cpu_s, variant))

    def reset(self) -> None:
        """Empty the bench server, so no variant pays for the previous one's data.

        SYNC: valkey frees a user's FLUSHALL lazily by default, which would show up as
        noise in the next variant's CPU and memory figures."""
        with self.redis() as client:
            client.execute_command("FLUSHALL", "SYNC")


class Meter:
    """The wall time and server CPU time of one measured section, from creation on."""

    def __init__(self, server_cpu_s: Callable[[], float | None]) -> None:
        self._server_cpu_s = server_cpu_s
        self._cpu_at = server_cpu_s()
        self._started = time.perf_counter()

    def rate(self, events: int, seconds: float | None = None) -> Rate:
        """`events` in the wall time since creation (or in `seconds`, when the section
        timed itself), with the server's CPU time meanwhile."""
        wall = time.perf_counter() - self._started if seconds is None else seconds
        cpu_now = self._server_cpu_s()
        server = None if cpu_now is None or self._cpu_at is None else cpu_now - self._cpu_at
        return Rate(events, wall, server)


def _process_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of a process, from /proc (Linux)."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
