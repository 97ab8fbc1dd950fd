"""Fan-out: publish cost with 1, 10 and 100 durables on the channel (scenario 3).

Publishing goes in batches of 100 (`publish_many`, an XADD pipeline, gathered
`js.publish`); the durables exist but do not consume. One scenario measures all
three counts, alternating them within each round so the machine's drift touches
them alike; each row reports its cost per event relative to 1 durable
(`cost_vs_1`, and `server_cost_vs_1` from the server's CPU time): cost must not
grow with the number of durables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .env import RAW_STREAM, Env, message, xadd_batches
from .peer import add_durables, jetstream, publish_batch, publish_one
from .results import VARIANTS, Rate, Row, Target, Variant, at_most, ratio
from .scenario import Scenario, Throughput
from .workers import batches

BATCH = 100
COST_CEILING = 1.1


class FanoutTo(Throughput):
    """Publishing with `n` durables on the channel."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.name = f"fanout_{n}"
        self.title = f"publish (batches of {BATCH}), {n} durable{'s' if n > 1 else ''}"

    def count(self, env: Env) -> int:
        return env.size(30_000, 500)

    def durables(self, env: Env) -> Rate:
        batch = [message() for _ in range(BATCH)]
        with env.durables() as client:
            channel = client.channel("fanout")
            for i in range(self.n):
                channel.durable(f"d{i}")
            channel.publish_many(batch[:1])
            sizes = batches(self.count(env), BATCH)
            meter = env.meter("durables")
            for size in sizes:
                channel.publish_many(batch[:size])
            return meter.rate(sum(sizes))

    def raw(self, env: Env) -> Rate:
        with env.redis() as r:
            for i in range(self.n):
                r.xgroup_create(RAW_STREAM, f"d{i}", "0", mkstream=True)
            sizes = batches(self.count(env), BATCH)
            meter = env.meter("raw")
            return meter.rate(xadd_batches(r, sizes))

    async def peer(self, env: Env, url: str) -> Rate:
        async with jetstream(url) as (_, js):
            await add_durables(js, [f"d{i}" for i in range(self.n)], max_ack_pending=1000)
            await publish_one(js)
            sizes = batches(self.count(env), BATCH)
            meter = env.meter("peer")
            for size in sizes:
                await publish_batch(js, size)
            return meter.rate(sum(sizes))


class Fanout(Scenario):
    """Publishing with each of `counts` durables on the channel; one row per count."""

    name = "fanout"
    title = "publish cost by number of durables"

    def __init__(self, counts: Sequence[int]) -> None:
        self.parts = [FanoutTo(n) for n in counts]

    @property
    def row_names(self) -> list[str]:
        return [part.name for part in self.parts]

    def run(self, env: Env) -> list[Row]:
        found = {part.name: {v: list[Rate]() for v in VARIANTS} for part in self.parts}
        notes: dict[str, dict[str, str]] = {part.name: {} for part in self.parts}
        for _ in range(env.rounds):
            for part in self.parts:
                got, said = part.outcomes(env, rounds=1)
                for variant, rates in got.items():
                    found[part.name][variant] += rates
                notes[part.name].update(said)
        rows = [part.row(found[part.name], notes[part.name]) for part in self.parts]
        for row in rows:
            for variant in VARIANTS:
                _add_costs(row, rows[0], variant)
        return rows

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        if row.name != self.parts[-1].name:
            return None
        cost = row.extra["cost_vs_1"]
        goal = f"cost ≤ {COST_CEILING}x with {self.parts[0].n}"
        return at_most(goal, None if cost is None else float(cost), COST_CEILING)


def _add_costs(row: Row, first: Row, variant: Variant) -> None:
    """Cost per event relative to the first row: wall time, and the server's CPU time."""
    prefix = "" if variant == "durables" else f"{variant}_"
    row.extra[f"{prefix}cost_vs_1"] = ratio(first.rate(variant), row.rate(variant))
    server, server_first = row.extra[f"{variant}_server_us"], first.extra[f"{variant}_server_us"]
    row.extra[f"{prefix}server_cost_vs_1"] = ratio(
        None if server is None else float(server),
        None if server_first is None else float(server_first),
    )
