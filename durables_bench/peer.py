"""The peer: nats-py against JetStream durable pull consumers on a local nats-server.

nats-py is imported here only (it is the optional `bench` extra); every function
is a coroutine, run by the scenarios with `asyncio.run`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING

from .env import HEADERS, PAYLOAD, PREFETCH
from .workers import AsyncStep, batches

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js.client import JetStreamContext

STREAM = "BENCH"
SUBJECT = "bench.events"
DURABLE = "work"
FETCH_TIMEOUT_S = 1.0


def available() -> str | None:
    """None if nats-py can be imported, else why not."""
    try:
        import nats  # noqa: F401
    except ImportError:
        return "nats-py is not installed (pip install 'durables[bench]')"
    return None


@asynccontextmanager
async def jetstream(url: str) -> AsyncIterator[tuple[Client, JetStreamContext]]:
    """A connection and its JetStream context, with a fresh file-backed stream `BENCH` on
    `bench.>`; the stream is deleted and the connection closed after."""
    import nats
    from nats.js.api import StorageType
    from nats.js.errors import NotFoundError

    nc: Client = await nats.connect(url, allow_reconnect=False)
    try:
        js = nc.jetstream(timeout=30.0)
        with suppress(NotFoundError):
            await js.delete_stream(STREAM)
        await js.add_stream(name=STREAM, subjects=["bench.>"], storage=StorageType.FILE)
        yield nc, js
        await js.delete_stream(STREAM)
    finally:
        await nc.close()


async def add_durables(js: JetStreamContext, names: list[str], max_ack_pending: int) -> None:
    """Durable pull consumers with explicit acks."""
    from nats.js.api import AckPolicy, ConsumerConfig

    for name in names:
        config = ConsumerConfig(
            durable_name=name, ack_policy=AckPolicy.EXPLICIT, max_ack_pending=max_ack_pending
        )
        await js.add_consumer(STREAM, config)


async def publish_one(js: JetStreamContext, payload: bytes = PAYLOAD) -> None:
    """One `js.publish`, awaiting the stream's ack."""
    await js.publish(SUBJECT, payload, headers=dict(HEADERS))


async def publish_batch(js: JetStreamContext, size: int) -> None:
    """`size` publishes awaited together."""
    await asyncio.gather(*(publish_one(js) for _ in range(size)))


async def prefill(js: JetStreamContext, count: int) -> None:
    """Store `count` events with `publish_async` (untimed set-up, so the fastest way)."""
    for size in batches(count, 1000):
        for _ in range(size):
            await js.publish_async(SUBJECT, PAYLOAD, headers=dict(HEADERS))
        await js.publish_async_completed()


def fetch_step(sub: JetStreamContext.PullSubscription, batch: int = PREFETCH) -> AsyncStep:
    """One fetch of up to `batch` events and an ack of each; 0 when none came in time."""

    async def step() -> int:
        try:
            msgs = await sub.fetch(batch, timeout=FETCH_TIMEOUT_S)
        except TimeoutError:  # nats.errors.TimeoutError is one (also asyncio's)
            return 0
        for msg in msgs:
            await msg.ack()
        return len(msgs)

    return step


async def stored_bytes(js: JetStreamContext) -> tuple[int, int]:
    """(bytes, messages) the stream holds, as the server counts them."""
    info = await js.stream_info(STREAM)
    return info.state.bytes, info.state.messages
