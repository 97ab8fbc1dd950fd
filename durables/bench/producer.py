"""The fixed-rate producer of the latency scenarios, run as its own process:

    python -m durables.bench.producer {durables|raw|peer} URL RATE COUNT

It publishes COUNT events at RATE per second, one per call, each payload starting
with its send time (`time.monotonic_ns()`, which is system-wide on Linux, so the
consuming process can subtract it from its own clock).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable

import redis

import durables

from .env import NAMESPACE, PAYLOAD, PROPERTIES, RAW_FIELDS, RAW_STREAM
from .workers import Pacer

STAMP_BYTES = 20
LATENCY_CHANNEL = "latency"


def stamped() -> bytes:
    """The payload with the current time in its first 20 bytes."""
    return b"%020d" % time.monotonic_ns() + PAYLOAD[STAMP_BYTES:]


def age_ms(data: bytes, now_ns: int) -> float:
    """Milliseconds since the event with payload `data` was sent."""
    return (now_ns - int(data[:STAMP_BYTES])) / 1e6


def paced(rate: float, count: int, send: Callable[[], None]) -> None:
    pacer = Pacer(rate)
    for i in range(count):
        pacer.wait(i)
        send()


def produce_durables(url: str, rate: float, count: int) -> None:
    with durables.connect(url, namespace=NAMESPACE) as client:
        channel = client.channel(LATENCY_CHANNEL)

        def send() -> None:
            channel.publish(stamped(), properties=PROPERTIES)

        paced(rate, count, send)


def produce_raw(url: str, rate: float, count: int) -> None:
    fields = dict(RAW_FIELDS)
    with redis.Redis.from_url(url) as r:

        def send() -> None:
            fields[b"d"] = stamped()
            r.xadd(RAW_STREAM, fields)  # type: ignore[arg-type]

        paced(rate, count, send)


async def produce_peer(url: str, rate: float, count: int) -> None:
    import nats

    from .peer import publish_one

    nc = await nats.connect(url, allow_reconnect=False)
    try:
        js = nc.jetstream(timeout=30.0)
        pacer = Pacer(rate)
        for i in range(count):
            pacer.wait(i)  # a blocking sleep: nothing else runs in this loop meanwhile
            await publish_one(js, stamped())
    finally:
        await nc.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4 or args[0] not in ("durables", "raw", "peer"):
        print(__doc__, file=sys.stderr)
        return 2
    variant, url, rate, count = args[0], args[1], float(args[2]), int(args[3])
    if variant == "durables":
        produce_durables(url, rate, count)
    elif variant == "raw":
        produce_raw(url, rate, count)
    else:
        asyncio.run(produce_peer(url, rate, count))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
