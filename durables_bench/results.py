"""What a scenario measures and how a result row looks, on screen and in JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Variant = Literal["durables", "raw", "peer", "memory"]
VARIANTS: tuple[Variant, ...] = ("durables", "raw", "peer")
"""The variants every compared scenario measures; `memory` (durables on `memory://`, in
this process) only the throughput scenarios, once, for information."""
Table = Literal["throughput", "latency", "memory"]
Number = float | int | None


class Unsupported(Exception):
    """A variant that cannot run yet (the library lacks the feature); reported as n/a."""


@dataclass(frozen=True)
class Rate:
    """`events` handled in `seconds`."""

    events: int
    seconds: float
    server_s: float | None = None
    """CPU time the server spent meanwhile (its own process: parsing, Lua, I/O, fsync)."""

    @property
    def per_s(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0

    @property
    def server_us(self) -> float | None:
        """Server CPU microseconds per event."""
        if not self.server_s or not self.events:
            return None  # unknown, or too short for the server's clock (nats: 10 ms ticks)
        return self.server_s * 1e6 / self.events


@dataclass(frozen=True)
class Latencies:
    """End-to-end latencies (milliseconds) of the events received in `seconds`."""

    samples_ms: list[float]
    seconds: float
    per_call: float | None = None
    """Events the producer sent per publish call (1.0: it kept up one event at a time)."""
    server: Rate | None = None
    """The server's CPU time over the whole run (from before the producer started until
    the last event came)."""

    @property
    def per_s(self) -> float:
        return len(self.samples_ms) / self.seconds if self.seconds > 0 else 0.0

    @property
    def server_busy(self) -> float | None:
        """The server's CPU time over the time events flowed (1.0: a core all the time).
        Not over the whole run: the producer process takes a second to start, while the
        server waits with nearly nothing to do."""
        if self.server is None or self.server.server_s is None or self.seconds <= 0:
            return None
        return self.server.server_s / self.seconds

    def percentile(self, p: float) -> float:
        """Nearest-rank percentile (p in 0..100)."""
        ordered = sorted(self.samples_ms)
        rank = max(1, min(len(ordered), -(-len(ordered) * p // 100)))
        return ordered[int(rank) - 1]


@dataclass
class Target:
    """A goal from the issue, and whether this run met it (None: not measurable here)."""

    goal: str
    met: bool | None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"goal": self.goal, "met": self.met, "detail": self.detail}


@dataclass
class Row:
    """One line of the report. The issue's keys are always present (None when not
    applicable); scenario-specific figures go to `extra`."""

    name: str
    title: str
    table: Table = "throughput"
    per_s: dict[Variant, float | None] = field(default_factory=dict)
    p50_ms: float | None = None
    p99_ms: float | None = None
    p99_9_ms: float | None = None
    extra: dict[str, Number] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    """Why a variant has no figure: 'durables' -> 'not supported yet: ...', 'peer' -> ..."""
    target: Target | None = None

    def rate(self, variant: Variant) -> float | None:
        return self.per_s.get(variant)

    def ratio(self, other: Variant) -> float | None:
        return ratio(self.rate("durables"), self.rate(other))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "table": self.table,
            "durables_per_s": _round(self.rate("durables"), 1),
            "raw_per_s": _round(self.rate("raw"), 1),
            "peer_per_s": _round(self.rate("peer"), 1),
            "memory_per_s": _round(self.rate("memory"), 1),
            "ratio_raw": _round(self.ratio("raw"), 4),
            "ratio_peer": _round(self.ratio("peer"), 4),
            "ratio_memory": _round(ratio(self.rate("memory"), self.rate("durables")), 4),
            "p50_ms": _round(self.p50_ms, 4),
            "p99_ms": _round(self.p99_ms, 4),
            "p99_9_ms": _round(self.p99_9_ms, 4),
            **{k: _round(v, 4) for k, v in self.extra.items()},
            "notes": dict(self.notes),
            "target": self.target.to_json() if self.target else None,
        }


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is missing or b is zero."""
    if a is None or b is None or b == 0:
        return None
    return a / b


def _round(value: Number, digits: int) -> Number:
    return None if value is None else round(float(value), digits)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def at_least(goal: str, value: float | None, floor: float) -> Target:
    """A target met when `value` is at least `floor`."""
    if value is None:
        return Target(goal, None, "not measured")
    return Target(goal, value >= floor, f"{value:.2f}")


def at_most(goal: str, value: float | None, ceiling: float) -> Target:
    """A target met when `value` is at most `ceiling`."""
    if value is None:
        return Target(goal, None, "not measured")
    return Target(goal, value <= ceiling, f"{value:.2f}")


def all_of(goal: str, parts: list[Target]) -> Target:
    """Met when every part is; None if any part could not be measured."""
    detail = ", ".join(p.detail for p in parts)
    if any(p.met is None for p in parts):
        measured = [p for p in parts if p.met is not None]
        failed = any(p.met is False for p in measured)
        return Target(goal, False if failed else None, detail)
    return Target(goal, all(bool(p.met) for p in parts), detail)
