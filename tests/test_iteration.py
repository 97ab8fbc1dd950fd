"""Lookups in one call (`client.durable(channel, name)`, one await on the asyncio client)
and iterating a consumer until it has been idle for a while (`events(idle_timeout=)`)."""

from __future__ import annotations

import asyncio
import time

import pytest

import durables
import durables.aio as aio
from durables import ConfigError, DurableExistsError

from .conftest import FAST
from .helpers import publish

pytestmark = [pytest.mark.both_clients]


def test_the_client_looks_a_durable_up_in_one_call(client: durables.Client) -> None:
    client.channel("orders").durable("fulfil", kind="shared", filter="qty > 1")
    found = client.durable("orders", "fulfil")
    assert found.kind == "shared" and found.spec.filter == "qty > 1"
    assert client.durable("orders", "fresh").kind == "exclusive"  # got or created
    with pytest.raises(DurableExistsError):
        client.durable("orders", "fulfil", filter="qty > 2")


def test_iterating_with_an_idle_timeout_stops_once_no_event_came_for_that_long(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("audit")
    publish(channel, 5)
    with dur.consumer() as c:
        started = time.monotonic()
        got = [event.text for event in c.events(idle_timeout=0.5)]
        took = time.monotonic() - started
    assert got == [f"e{i}" for i in range(1, 6)]
    assert 0.45 <= took < 0.5 + 2 * FAST["block_s"] + 1.0


def test_an_idle_timeout_that_is_not_seconds_is_refused(channel: durables.Channel) -> None:
    with channel.durable("audit").consumer() as c, pytest.raises(ConfigError, match="idle"):
        next(iter(c.events(idle_timeout=-1)))


def test_async_for_with_an_idle_timeout_and_a_one_await_lookup(
    server_url: str, namespace: str, client_kind: str
) -> None:
    if client_kind == "sync":
        pytest.skip("the asyncio client's own syntax")

    async def worker() -> list[str]:
        client = await aio.connect(server_url, namespace=namespace, **FAST)
        try:
            dur = await client.durable("orders", "fulfil", kind="shared")
            channel = await client.channel("orders")
            await channel.publish_many([durables.Message(f"e{i}".encode()) for i in (1, 2, 3)])
            async with dur.consumer("w1") as consumer:
                return [event.text async for event in consumer.events(idle_timeout=0.5)]
        finally:
            await client.close()

    assert asyncio.run(worker()) == ["e1", "e2", "e3"]
