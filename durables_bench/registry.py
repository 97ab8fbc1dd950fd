"""Every scenario of `durables bench`, in report order.

To add one (session replay, reconnection, failover, Spark): write a `Throughput`
subclass in a module of this package with its three variants (`durables`, `raw`,
`peer`) and, if the issue sets a goal, a `target`; then append an instance here.
A variant the library cannot run yet raises `Unsupported` and shows as n/a.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from .consume import Consume
from .fanout import Fanout
from .fetch_cost import FetchCost
from .footprint import Memory
from .guarantees import IdempotenceCost, ReplicatedRead
from .in_order import ConsumeInOrder
from .latency import Latency
from .publish import PublishBatch, PublishSingle
from .replay import SessionReplay
from .scenario import Scenario
from .session_load import ReconnectFirstEvent, SessionFanout
from .spark import SparkThroughput

SCENARIOS: list[Scenario] = [
    PublishSingle(),
    PublishBatch(100),
    PublishBatch(1000),
    IdempotenceCost(1),
    IdempotenceCost(1000),
    ReplicatedRead(),
    Consume("exclusive", consumers=1),
    Consume("shared", consumers=4),
    Consume("serial", consumers=2),
    ConsumeInOrder(consumers=2),
    Consume("keyed", consumers=4),
    Fanout((1, 10, 100)),
    Latency("exclusive", consumers=1),
    Latency("shared", consumers=4),
    Latency("serial", consumers=2),
    Latency("keyed", consumers=4),
    Latency("keyed", consumers=16, suffix="_16"),  # many idle consumers: one wakes per event
    Memory(),
    FetchCost(),
    SessionReplay(),
    SessionFanout(),
    ReconnectFirstEvent(),
    SparkThroughput(),
]


def select(patterns: list[str] | None) -> list[Scenario]:
    """The scenarios a pattern names: exactly, as a glob (`consume_*`), or as a family
    (`consume` for every `consume_...`)."""
    if not patterns:
        return list(SCENARIOS)
    return [s for s in SCENARIOS if any(_names(s, p) for p in patterns)]


def _names(scenario: Scenario, pattern: str) -> bool:
    names = [scenario.name, *scenario.row_names]
    return any(fnmatchcase(n, pattern) or n.startswith(f"{pattern}_") for n in names)
