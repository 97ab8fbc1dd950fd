"""Fan-out: publish cost with 1, 10 and 100 durables on the channel (issue #4, scenario 3).

Publishing goes in batches of 100 (`publish_many`, an XADD pipeline, gathered
`js.publish`); the durables exist but do not consume. The row of N durables
reports its cost per event relative to the row of 1 (`cost_vs_1`): the target
is that cost does not grow with the number of durables.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from .env import RAW_FIELDS, RAW_STREAM, Env, message
from .peer import add_durables, jetstream, publish_batch, publish_one
from .results import VARIANTS, Rate, Row, Target, at_most, ratio
from .scenario import Throughput
from .workers import batches

BATCH = 100
COST_CEILING = 1.1


class Fanout(Throughput):
    """Publishing with `n` durables on the channel."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.name = f"fanout_{n}"
        self.title = f"publish (batches of {BATCH}), {n} durable{'s' if n > 1 else ''}"

    def count(self, env: Env) -> int:
        return env.size(50_000, 500)

    def durables(self, env: Env) -> Rate:
        batch = [message() for _ in range(BATCH)]
        with env.durables() as client:
            channel = client.channel("fanout")
            for i in range(self.n):
                channel.durable(f"d{i}")
            channel.publish_many(batch[:1])
            sizes = batches(self.count(env), BATCH)
            start = time.perf_counter()
            for size in sizes:
                channel.publish_many(batch[:size])
            return Rate(sum(sizes), time.perf_counter() - start)

    def raw(self, env: Env) -> Rate:
        with env.redis() as r:
            for i in range(self.n):
                r.xgroup_create(RAW_STREAM, f"d{i}", "0", mkstream=True)
            sizes = batches(self.count(env), BATCH)
            start = time.perf_counter()
            for size in sizes:
                pipe = r.pipeline(transaction=False)
                for _ in range(size):
                    pipe.xadd(RAW_STREAM, RAW_FIELDS)  # type: ignore[arg-type]
                pipe.execute()
            return Rate(sum(sizes), time.perf_counter() - start)

    async def peer(self, env: Env, url: str) -> Rate:
        async with jetstream(url) as (_, js):
            await add_durables(js, [f"d{i}" for i in range(self.n)], max_ack_pending=1000)
            await publish_one(js)
            sizes = batches(self.count(env), BATCH)
            start = time.perf_counter()
            for size in sizes:
                await publish_batch(js, size)
            return Rate(sum(sizes), time.perf_counter() - start)

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        """Adds `cost_vs_1` (and the raw and peer twins) from the fanout_1 row."""
        one = rows.get("fanout_1")
        if one is None:
            return None
        for variant in VARIANTS:
            key = "cost_vs_1" if variant == "durables" else f"{variant}_cost_vs_1"
            row.extra[key] = ratio(one.rate(variant), row.rate(variant))
        if self.n < 100:
            return None
        cost = row.extra["cost_vs_1"]
        return at_most(f"cost ≤ {COST_CEILING}× with 1 durable", cost, COST_CEILING)
