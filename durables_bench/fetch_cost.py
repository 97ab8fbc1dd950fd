"""Fetch cost: the cost of one shared-durable fetch must not grow with the
number of events retained in the channel or the number of consumers attached.

One consumer fetches (prefetch 100, auto-ack) through `MEASURED` events, with the
channel holding only those, then with `RETAINED` more events behind them, then with 15
other consumers attached (idle, their windows full). Each row gives the time per fetch
and its ratio to the first row. Durables only: raw and nats have no dispatcher.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from .consume import fill_channel
from .env import PREFETCH, Env
from .results import Row, Target, at_most, median
from .scenario import Scenario

MEASURED = 20_000
RETAINED = 200_000
IDLE_CONSUMERS = 15
CEILING = 1.25
"""Allowed growth with idle consumers (noise on this machine is +-20 %)."""
RETAINED_CEILING = 1.05
"""Allowed growth with 200,000 events retained: the fetch must not read what it keeps."""


class FetchCost(Scenario):
    name = "fetch_cost"
    title = "shared fetch cost by channel size and consumers"
    cases = (
        ("fetch_cost_base", 0, 0),
        ("fetch_cost_200k_retained", RETAINED, 0),
        ("fetch_cost_16_consumers", 0, IDLE_CONSUMERS),
    )

    @property
    def row_names(self) -> list[str]:
        return [name for name, _, _ in self.cases]

    def run(self, env: Env) -> list[Row]:
        measured = env.size(MEASURED, 500)
        costs: dict[str, list[float]] = {name: [] for name, _, _ in self.cases}
        for round_ in range(env.rounds):
            # each round starts with another case, so no case always runs first
            shift = round_ % len(self.cases)
            for name, retained, idle in self.cases[shift:] + self.cases[:shift]:
                env.reset()
                costs[name].append(self.fetch_us(env, measured, env.size(retained, 2_000), idle))
        base = median(costs[self.cases[0][0]])
        rows = []
        for name, retained, idle in self.cases:
            us = median(costs[name])
            row = Row(name, f"fetch, {retained:,} more retained, {idle + 1} consumers")
            row.per_s["durables"] = PREFETCH * 1e6 / us
            row.extra["durables_us_per_fetch"] = us
            row.extra["cost_vs_base"] = us / base
            row.notes["raw"] = row.notes["peer"] = "durables only: no dispatcher to compare"
            rows.append(row)
        return rows

    def fetch_us(self, env: Env, measured: int, retained: int, idle: int) -> float:
        with env.durables() as client:
            channel = client.channel("cost")
            durable = channel.durable("work", kind="shared")
            others = [durable.consumer(f"idle{i}", prefetch=PREFETCH) for i in range(idle)]
            fill_channel(channel, measured + retained + idle * PREFETCH)
            try:
                for other in others:
                    other.fetch(timeout=0)  # take a full window and sit on it
                with durable.consumer("measured", prefetch=PREFETCH, auto_ack=True) as c:
                    fetches, got, started = 0, 0, time.perf_counter()
                    deadline = time.monotonic() + 120
                    while got < measured and time.monotonic() < deadline:
                        got += len(c.fetch(timeout=0.2))
                        fetches += 1
                    if got < measured:
                        raise RuntimeError(f"fetched {got} of {measured} events")
                    return (time.perf_counter() - started) * 1e6 / fetches
            finally:
                for other in others:
                    other.close()

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        if row.name == self.cases[0][0]:
            return None
        cost = row.extra.get("cost_vs_base")
        ceiling = RETAINED_CEILING if row.name == self.cases[1][0] else CEILING
        return at_most(f"cost ≤ {ceiling}x base", None if cost is None else float(cost), ceiling)
