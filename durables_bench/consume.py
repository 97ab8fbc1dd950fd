"""Consume + ack scenarios, one per durable kind (scenario 2).

The channel is filled first (untimed); then the timed part drains it with N
consumers, each in its own thread (asyncio tasks for the peer), reading
`PREFETCH` events at a time and acknowledging them. A keyed durable's channel holds
events of `KEYS` keys in turn; its plain program is the shared one (the plain program
has no order to keep), and so is its peer (JetStream has no order per key).

- durables: `dur.consumer(name, prefetch=..., auto_ack=True)`, `fetch()` in a loop.
- raw: per consumer, a pipeline of `XACK` (previous batch) + `XREADGROUP COUNT`.
- peer: one JetStream durable pull consumer, N `fetch(PREFETCH)` loops, `ack()` each.
  JetStream has no serial kind; its nearest is a cap on unacknowledged events
  (`max_ack_pending=PREFETCH`), with each of the N fetchers asking for its share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import redis

import durables

from .env import KEYS, PREFETCH, RAW_GROUP, RAW_STREAM, Env, message, xadd_batches
from .peer import DURABLE, STREAM, add_durables, fetch_step, jetstream, prefill
from .results import Rate, Row, Target, all_of, at_least
from .scenario import Throughput
from .workers import Step, batches, run_tasks, run_workers

RAW_FLOOR = {"exclusive": 0.9, "shared": 0.9, "serial": 0.9, "keyed": 0.85}
PEER_FLOOR = 2.0


def fill_channel(channel: durables.Channel, count: int, *, keyed: bool = False) -> None:
    """Publish `count` events in batches of 1,000 (untimed set-up); `keyed`: with `KEYS`
    keys in turn."""
    batch = [message(f"k{i % KEYS}" if keyed else None) for i in range(1000)]
    for size in batches(count, 1000):
        channel.publish_many(batch[:size])


def fill_raw(r: redis.Redis, count: int) -> None:
    """XADD `count` events in pipelines of 1,000 (untimed set-up)."""
    xadd_batches(r, batches(count, 1000))


def durables_step(consumer: durables.Consumer) -> Step:
    """What a user writes: fetch and handle; with auto-ack the batch is acknowledged with
    the next fetch, in the same round trip (as the raw loop pipelines XACK + XREADGROUP)."""

    def step() -> int:
        return len(consumer.fetch(timeout=0.2))

    return step


class RawConsumer:
    """XREADGROUP COUNT + XACK of the previous batch, pipelined: one round trip per batch."""

    def __init__(self, r: redis.Redis, name: str, block_ms: int | None = None) -> None:
        self.r = r
        self.name = name
        self.block_ms = block_ms
        self.unacked: list[bytes] = []

    def create_group(self) -> None:
        self.r.xgroup_create(RAW_STREAM, RAW_GROUP, "0", mkstream=True)

    def read(self) -> list[tuple[bytes, dict[bytes, bytes]]]:
        pipe = self.r.pipeline(transaction=False)
        if self.unacked:
            pipe.xack(RAW_STREAM, RAW_GROUP, *self.unacked)
        pipe.xreadgroup(
            RAW_GROUP, self.name, {RAW_STREAM: ">"}, count=PREFETCH, block=self.block_ms
        )
        got = pipe.execute()[-1]
        entries: list[tuple[bytes, dict[bytes, bytes]]] = got[0][1] if got else []
        self.unacked = [entry[0] for entry in entries]
        return entries

    def step(self) -> int:
        return len(self.read())

    def finish(self) -> None:
        if self.unacked:
            self.r.xack(RAW_STREAM, RAW_GROUP, *self.unacked)
            self.unacked = []


@contextmanager
def raw_readers(connect: Callable[[], redis.Redis], count: int) -> Iterator[list[RawConsumer]]:
    """`count` plain readers (`w0`, `w1`, ...), each on a client of its own, closed on leaving."""
    clients = [connect() for _ in range(count)]
    try:
        yield [RawConsumer(r, f"w{i}") for i, r in enumerate(clients)]
    finally:
        for r in clients:
            r.close()


def drain_raw(readers: Sequence[RawConsumer], target: int) -> Rate:
    """The readers, each on a thread, until `target` events are read; their last
    acknowledgements count in the timed window."""

    def finish() -> None:
        for reader in readers:
            reader.finish()

    return run_workers([reader.step for reader in readers], target, finish)


@contextmanager
def consumers(durable: durables.Durable, count: int) -> Iterator[list[durables.Consumer]]:
    """`count` auto-ack consumers (prefetch on shared and serial), closed on leaving."""
    prefetch = None if durable.kind == "exclusive" else PREFETCH
    opened: list[durables.Consumer] = []
    try:
        for i in range(count):
            opened.append(durable.consumer(f"w{i}", prefetch=prefetch, auto_ack=True))
        yield opened
    finally:
        for consumer in opened:
            consumer.close()


class Consume(Throughput):
    """Consume + ack with `consumers` consumers on a durable of `kind`."""

    def __init__(self, kind: durables.Kind, consumers: int) -> None:
        self.kind: durables.Kind = kind
        self.consumers = consumers
        self.name = f"consume_{kind}"
        plural = "s" if consumers > 1 else ""
        self.title = f"consume + ack, {kind} ({consumers} consumer{plural})"

    def count(self, env: Env) -> int:
        return env.size(30_000, 1_000)

    def durables(self, env: Env) -> Rate:
        with env.durables() as client:
            channel = client.channel("consume")
            durable = channel.durable("work", kind=self.kind)
            fill_channel(channel, self.count(env), keyed=self.kind == "keyed")
            with consumers(durable, self.consumers) as opened:
                meter = env.meter("durables")
                rate = run_workers([durables_step(c) for c in opened], self.count(env))
                return meter.rate(rate.events, rate.seconds)

    def raw(self, env: Env) -> Rate:
        with raw_readers(env.redis, self.consumers) as readers:
            readers[0].create_group()
            fill_raw(readers[0].r, self.count(env))
            meter = env.meter("raw")
            rate = drain_raw(readers, self.count(env))
            return meter.rate(rate.events, rate.seconds)

    async def peer(self, env: Env, url: str) -> Rate:
        async with jetstream(url) as (nc, js):
            await prefill(js, self.count(env))
            # serial: at most PREFETCH unacknowledged in all, shared by the fetchers
            serial = self.kind == "serial"
            cap = PREFETCH if serial else 1000 * self.consumers
            batch = PREFETCH // self.consumers if serial else PREFETCH
            await add_durables(js, [DURABLE], max_ack_pending=cap)
            subs = [
                await js.pull_subscribe_bind(durable=DURABLE, stream=STREAM)
                for _ in range(self.consumers)
            ]
            steps = [fetch_step(s, batch) for s in subs]
            meter = env.meter("peer")
            rate = await run_tasks(steps, self.count(env))
            await nc.flush()  # the last acks are on the wire
            return meter.rate(rate.events, rate.seconds)

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        if self.kind == "serial":
            return None  # judged against one plain reader in order (ConsumeInOrder)
        floor = RAW_FLOOR[self.kind]
        return all_of(
            f"≥ {floor}x raw, ≥ {PEER_FLOOR:g}x nats",
            [
                at_least("raw", row.ratio("raw"), floor),
                at_least("peer", row.ratio("peer"), PEER_FLOOR),
            ],
        )
