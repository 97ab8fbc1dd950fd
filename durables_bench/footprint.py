"""Memory: server bytes per retained event and per pending entry (scenario 5).

N events are published (retained: nothing has acknowledged them), then read by one
consumer without acknowledging (pending). Bytes are measured twice: `MEMORY USAGE`
(exact, `SAMPLES 0`) summed over the channel's keys, and the server's
`used_memory_dataset` (INFO: used memory less client buffers and other overhead) before
and after. The peer's figure is what JetStream reports it stores per
message (file storage, so disk rather than memory); it has no per-pending figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import redis

from .consume import RawConsumer, fill_channel, fill_raw
from .env import RAW_STREAM, Env
from .peer import DURABLE, add_durables, jetstream, prefill, stored_bytes
from .results import Row, Target, Variant, at_most, ratio
from .scenario import Compared

CEILING = 1.2


@dataclass(frozen=True)
class Footprint:
    """Bytes per event: retained and pending, by MEMORY USAGE and by INFO."""

    retained: float
    pending: float | None = None
    retained_info: float | None = None
    pending_info: float | None = None


def used_memory(r: redis.Redis) -> int:
    """The dataset's share of used memory: client query buffers (a 1,000-event publish
    leaves a large one behind for a while) would otherwise blur small runs."""
    return int(r.info("memory")["used_memory_dataset"])


def usage(r: redis.Redis, pattern: str) -> int:
    """MEMORY USAGE (every element counted) summed over the keys matching `pattern`."""
    return sum(r.memory_usage(key, samples=0) or 0 for key in r.scan_iter(match=pattern))


class Probe:
    """Memory readings of one set of keys, as deltas per event."""

    def __init__(self, r: redis.Redis, pattern: str, events: int) -> None:
        self.r = r
        self.pattern = pattern
        self.events = events
        self.mark()

    def mark(self) -> None:
        self.keys_at = usage(self.r, self.pattern)
        self.info_at = used_memory(self.r)

    def per_event(self) -> tuple[float, float]:
        """(MEMORY USAGE delta, INFO delta) per event since the last mark."""
        keys = (usage(self.r, self.pattern) - self.keys_at) / self.events
        info = (used_memory(self.r) - self.info_at) / self.events
        self.mark()
        return keys, info


class Memory(Compared[Footprint]):
    """Bytes per retained event and per pending entry: durables vs raw XADD (and nats)."""

    name = "memory"
    title = "server memory"

    @property
    def row_names(self) -> list[str]:
        return ["memory_retained", "memory_pending"]

    def count(self, env: Env) -> int:
        return env.size(100_000, 2_000)

    def durables(self, env: Env) -> Footprint:
        n = self.count(env)
        with env.durables() as client, env.redis() as r:
            channel = client.channel("memory")
            durable = channel.durable("work")
            probe = Probe(r, f"{channel.keys.prefix}:*", n)
            fill_channel(channel, n)
            retained, retained_info = probe.per_event()
            with durable.consumer("w0", auto_ack=False) as consumer:
                got = 0
                while got < n:
                    events = consumer.fetch(timeout=5.0)
                    if not events:
                        raise RuntimeError(f"read {got} of {n} events")
                    got += len(events)
                pending, pending_info = probe.per_event()
        return Footprint(retained, pending, retained_info, pending_info)

    def raw(self, env: Env) -> Footprint:
        n = self.count(env)
        with env.redis() as r:
            reader = RawConsumer(r, "w0")
            reader.create_group()
            probe = Probe(r, RAW_STREAM, n)
            fill_raw(r, n)
            retained, retained_info = probe.per_event()
            got = 0
            while got < n:
                got += len(reader.read())
                reader.unacked = []  # keep them pending
            pending, pending_info = probe.per_event()
        return Footprint(retained, pending, retained_info, pending_info)

    async def peer(self, env: Env, url: str) -> Footprint:
        async with jetstream(url) as (_, js):
            await add_durables(js, [DURABLE], max_ack_pending=1000)
            await prefill(js, self.count(env))
            stored, messages = await stored_bytes(js)
        return Footprint(stored / messages)

    def run(self, env: Env) -> list[Row]:
        outcomes, notes = self.outcomes(env, rounds=1)
        found = {variant: got[0] for variant, got in outcomes.items() if got}
        return [
            _row("memory_retained", "bytes per retained event", found, notes, "retained"),
            _row("memory_pending", "bytes per pending entry", found, notes, "pending"),
        ]

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        if row.name != "memory_retained":
            return None
        return at_most(f"≤ {CEILING}x raw", _number(row.extra["ratio_bytes_raw"]), CEILING)


def _number(value: float | int | None) -> float | None:
    return None if value is None else float(value)


def _row(
    name: str, title: str, found: dict[Variant, Footprint], notes: dict[str, str], what: str
) -> Row:
    def figure(variant: Variant, suffix: str = "") -> float | None:
        got = found.get(variant)
        value = getattr(got, what + suffix) if got else None
        return None if value is None else float(value)

    row = Row(name, title, table="memory", notes=dict(notes))
    row.extra = {
        "durables_bytes": figure("durables"),
        "raw_bytes": figure("raw"),
        "peer_bytes": figure("peer"),
        "ratio_bytes_raw": ratio(figure("durables"), figure("raw")),
        "durables_info_bytes": figure("durables", "_info"),
        "raw_info_bytes": figure("raw", "_info"),
    }
    if what == "pending" and "peer" in found:
        row.notes["peer"] = "JetStream does not report bytes per pending ack"
    return row
