"""The fixed-rate producer of the latency scenarios, run as its own process:

    python -m durables_bench.producer {durables|durables-keyed|raw|peer} URL RATE COUNT

It publishes COUNT events at RATE per second, each payload starting with its send
time (`time.monotonic_ns()`, system-wide on Linux, so the consuming process can
subtract it from its own clock). It sends one event per call while it keeps up and
the events due meanwhile in one call when it fell behind (`publish_many`, an XADD
pipeline, gathered `js.publish`), so every variant holds the rate. At the end it
prints `{"sent": N, "calls": C, "seconds": S}` on stdout.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
from collections.abc import Awaitable, Callable

import redis

import durables

from .env import KEYS, NAMESPACE, PAYLOAD, PROPERTIES, RAW_FIELDS, RAW_STREAM
from .peer import publish_one
from .workers import Pacer

STAMP_BYTES = 20
LATENCY_CHANNEL = "latency"
MAX_CALL = 100
"""Most events sent in one call by a producer that fell behind."""


def stamped() -> bytes:
    """The payload with the current time in its first 20 bytes."""
    return b"%020d" % time.monotonic_ns() + PAYLOAD[STAMP_BYTES:]


def age_ms(data: bytes, now_ns: int) -> float:
    """Milliseconds since the event with payload `data` was sent."""
    return (now_ns - int(data[:STAMP_BYTES])) / 1e6


class Stats:
    def __init__(self) -> None:
        self.sent = 0
        self.calls = 0
        self.start = time.perf_counter()

    def next_call(self, pacer: Pacer, count: int) -> int:
        """Wait for the next due event; how many to send in this call."""
        n = min(pacer.due(self.sent), count - self.sent, MAX_CALL)
        self.sent += n
        self.calls += 1
        return n

    def report(self) -> str:
        seconds = time.perf_counter() - self.start
        return json.dumps({"sent": self.sent, "calls": self.calls, "seconds": seconds})


def paced(rate: float, count: int, send: Callable[[int], object]) -> Stats:
    stats, pacer = Stats(), Pacer(rate)
    while stats.sent < count:
        send(stats.next_call(pacer, count))
    return stats


def produce_durables(url: str, rate: float, count: int, keyed: bool = False) -> Stats:
    """`keyed`: each event with one of `KEYS` keys in turn (a keyed durable's channel)."""
    with durables.connect(url, namespace=NAMESPACE) as client:
        channel = client.channel(LATENCY_CHANNEL)
        turn = itertools.count()

        def key() -> str | None:
            return f"k{next(turn) % KEYS}" if keyed else None

        def send(n: int) -> None:
            if n == 1:
                channel.publish(stamped(), key=key(), properties=PROPERTIES)
            else:
                channel.publish_many(
                    [durables.Message(stamped(), key=key(), properties=PROPERTIES)
                     for _ in range(n)]
                )  # fmt: skip

        return paced(rate, count, send)


def produce_raw(url: str, rate: float, count: int) -> Stats:
    fields = dict(RAW_FIELDS)
    with redis.Redis.from_url(url) as r:

        def send(n: int) -> None:
            if n == 1:
                fields[b"d"] = stamped()
                r.xadd(RAW_STREAM, fields)
                return
            pipe = r.pipeline(transaction=False)
            for _ in range(n):
                fields[b"d"] = stamped()
                pipe.xadd(RAW_STREAM, dict(fields))
            pipe.execute()

        return paced(rate, count, send)


async def produce_peer(url: str, rate: float, count: int) -> Stats:
    import nats

    nc = await nats.connect(url, allow_reconnect=False)
    try:
        js = nc.jetstream(timeout=30.0)
        stats, pacer = Stats(), Pacer(rate)
        while stats.sent < count:
            n = stats.next_call(pacer, count)  # a blocking sleep: nothing else runs meanwhile
            calls: list[Awaitable[None]] = [publish_one(js, stamped()) for _ in range(n)]
            await asyncio.gather(*calls)
        return stats
    finally:
        await nc.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4 or args[0] not in ("durables", "durables-keyed", "raw", "peer"):
        print(__doc__, file=sys.stderr)
        return 2
    variant, url, rate, count = args[0], args[1], float(args[2]), int(args[3])
    if variant.startswith("durables"):
        stats = produce_durables(url, rate, count, keyed=variant == "durables-keyed")
    elif variant == "raw":
        stats = produce_raw(url, rate, count)
    else:
        stats = asyncio.run(produce_peer(url, rate, count))
    print(stats.report())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
