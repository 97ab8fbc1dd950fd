"""Publish scenarios: one event per call, and batches (scenario 1).

durables: `Channel.publish` / `Channel.publish_many`; raw: `XADD` / a pipeline of
`XADD`s; peer: `js.publish` / a batch of `js.publish` awaited together. Every
channel (stream) has one durable (consumer group, JetStream durable) on it.
"""

from __future__ import annotations

from collections.abc import Mapping

from .env import PAYLOAD, PROPERTIES, RAW_FIELDS, RAW_GROUP, RAW_STREAM, Env, message, xadd_batches
from .peer import DURABLE, add_durables, jetstream, publish_batch, publish_one
from .results import Rate, Row, Target, at_least
from .scenario import Throughput
from .workers import batches


class PublishSingle(Throughput):
    """Unbatched publishing: one round trip per event for every variant."""

    name = "publish_single"
    title = "publish, 1 event per call"

    def count(self, env: Env) -> int:
        return env.size(10_000, 300)

    def durables(self, env: Env) -> Rate:
        with env.durables() as client:
            channel = client.channel("publish")
            channel.durable("d0")
            channel.publish(PAYLOAD, properties=PROPERTIES)  # loads the script
            n = self.count(env)
            meter = env.meter("durables")
            for _ in range(n):
                channel.publish(PAYLOAD, properties=PROPERTIES)
            return meter.rate(n)

    def raw(self, env: Env) -> Rate:
        with env.redis() as r:
            r.xgroup_create(RAW_STREAM, RAW_GROUP, "0", mkstream=True)
            n = self.count(env)
            meter = env.meter("raw")
            for _ in range(n):
                r.xadd(RAW_STREAM, RAW_FIELDS)
            return meter.rate(n)

    async def peer(self, env: Env, url: str) -> Rate:
        async with jetstream(url) as (_, js):
            await add_durables(js, [DURABLE], max_ack_pending=1000)
            await publish_one(js)
            n = self.count(env)
            meter = env.meter("peer")
            for _ in range(n):
                await publish_one(js)
            return meter.rate(n)

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        return at_least("≥ 0.9x raw", row.ratio("raw"), 0.9)


class PublishBatch(Throughput):
    """Batches of `size` events per call: `publish_many`, an XADD pipeline, gathered
    `js.publish` calls."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.name = f"publish_batch_{size}"
        self.title = f"publish, batches of {size:,}"

    def count(self, env: Env) -> int:
        return env.size(50_000 if self.size < 1000 else 100_000, 4 * self.size)

    def durables(self, env: Env) -> Rate:
        batch = [message() for _ in range(self.size)]
        with env.durables() as client:
            channel = client.channel("publish")
            channel.durable("d0")
            channel.publish_many(batch[:1])
            sizes = batches(self.count(env), self.size)
            meter = env.meter("durables")
            for size in sizes:
                channel.publish_many(batch if size == self.size else batch[:size])
            return meter.rate(sum(sizes))

    def raw(self, env: Env) -> Rate:
        with env.redis() as r:
            r.xgroup_create(RAW_STREAM, RAW_GROUP, "0", mkstream=True)
            sizes = batches(self.count(env), self.size)
            meter = env.meter("raw")
            return meter.rate(xadd_batches(r, sizes))

    async def peer(self, env: Env, url: str) -> Rate:
        async with jetstream(url) as (_, js):
            await add_durables(js, [DURABLE], max_ack_pending=1000)
            await publish_one(js)
            sizes = batches(self.count(env), self.size)
            meter = env.meter("peer")
            for size in sizes:
                await publish_batch(js, size)
            return meter.rate(sum(sizes))

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        return at_least("≥ 1.5x raw", row.ratio("raw"), 1.5)
