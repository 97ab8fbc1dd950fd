"""An asyncio fetch cancelled while its read is on the wire loses no event.

`asyncio.wait_for(consumer.fetch(), ...)`, `asyncio.timeout` and a task group shutting
down cancel a fetch wherever it awaits. Cancelled after the server ran its read (the
events are now pending for the consumer) and before the reply came back, the events were
never handed out: the next fetch must bring them, unflagged, and no acknowledgement of a
later event may cover them (an exclusive durable's acknowledgement is cumulative). A
proxy's latency holds the reply back long enough to cancel at that moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest

import durables
import durables.aio as aio

from .faultproxy import FaultProxy
from .servers import RedisProcess

LATENCY_S = 0.4
"""Each way through the proxy: a read reaches the server after this, its reply comes after
twice this."""
EVENTS = 10
SETTINGS: dict[str, Any] = {"lease_timeout_s": 30.0, "block_s": 0.2, "housekeep_interval_s": 3600.0}


def _numbers(events: list[durables.Event]) -> list[int]:
    return [int(event.text) for event in events]


async def _cancelled_midway(consumer: aio.AsyncConsumer, durable: aio.AsyncDurable) -> int:
    """A fetch cancelled once its read ran on the server (the events are pending), before
    its reply arrived; how many were pending then."""
    task = asyncio.create_task(consumer.fetch(timeout=0))
    pending, deadline = 0, time.monotonic() + 3 * LATENCY_S
    while pending < EVENTS and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
        pending = await durable.transaction_depth()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return pending


@pytest.mark.parametrize("kind", ["exclusive", "shared", "serial", "keyed"])
def test_a_fetch_cancelled_with_its_reply_on_the_way_loses_nothing(
    server: RedisProcess, namespace: str, kind: durables.Kind
) -> None:
    async def run(proxy: FaultProxy) -> tuple[list[int], list[bool], int, int]:
        direct = await aio.connect(server.url, namespace=namespace, **SETTINGS)
        through = await aio.connect(proxy.url, namespace=namespace, **SETTINGS)
        async with direct, through:
            channel = await direct.channel("orders")
            watched = await channel.durable("audit", kind=kind)
            durable = await (await through.channel("orders")).durable("audit", kind=kind)
            prefetch = None if kind == "exclusive" else 2 * EVENTS
            async with durable.consumer("c", auto_ack=False, prefetch=prefetch) as consumer:
                assert await consumer.fetch(timeout=0) == []  # connected, attached
                await channel.publish_many(
                    [durables.Message(str(n), key=f"k{n}") for n in range(EVENTS)]
                )
                proxy.latency(LATENCY_S)
                pending = await _cancelled_midway(consumer, watched)
                proxy.latency(0)
                await channel.publish(str(EVENTS), key="last")
                got: list[durables.Event] = []
                for _ in range(20):
                    got += await consumer.fetch(timeout=0.5)
                    await consumer.commit()  # a serial durable deals on once acknowledged
                    if len(got) > EVENTS:
                        break
            depth = await durable.depth()
        return _numbers(got), [event.redelivered for event in got], pending, depth

    with FaultProxy(server.port) as proxy:
        numbers, flags, pending, depth = asyncio.run(run(proxy))
    print(f"{kind}: pending after the cancel {pending}, then delivered {numbers}, depth {depth}")
    assert pending == EVENTS  # the cancelled read took them
    assert sorted(numbers) == list(range(EVENTS + 1))  # none lost, none twice
    assert not any(flags)  # never handed out before: not redelivered
    assert depth == 0
