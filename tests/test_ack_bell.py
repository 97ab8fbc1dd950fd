"""Acknowledgements sent on their own (`ack()`, `commit()`) wake a fetch that waits for
them: the consumer's own fetch blocked with a full window, a serial line's fetches
blocked while it is held. They ring the durable's bell only then; any other ring would
wake the waiters for nothing. Reads block for seconds here, so a wake-up that did not
happen shows as a fetch that took a whole block time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

import durables
from durables.keys import ChannelKeys

from .conftest import FAST, Connect
from .helpers import publish, texts
from .servers import RedisProcess

pytestmark = pytest.mark.both_clients

BLOCK_S = 5.0
SETTINGS = {**FAST, "lease_timeout_s": 30.0, "block_s": BLOCK_S, "socket_timeout_s": 10.0}
WOKEN_S = 2.0
"""Well within the block time: the fetch was woken, not timed out."""


@contextmanager
def fetching(consumer: durables.Consumer) -> Iterator[Callable[[], list[durables.Event]]]:
    """A fetch blocked on another thread; the context's value joins it (what it got)."""
    got: list[durables.Event] = []
    thread = threading.Thread(target=lambda: got.extend(consumer.fetch(timeout=8)))
    thread.start()

    def joined() -> list[durables.Event]:
        thread.join(timeout=10)
        assert not thread.is_alive()
        return got

    try:
        yield joined
    finally:
        thread.join(timeout=10)


def bell_id(server: RedisProcess, namespace: str) -> bytes | None:
    with server.client() as raw:
        newest = raw.xrevrange(ChannelKeys(namespace, "orders").bell("work"), count=1)
    return newest[0][0] if newest else None


@contextmanager
def holding_two(
    server: RedisProcess, namespace: str, connect: Connect, kind: durables.Kind
) -> Iterator[tuple[durables.Consumer, list[durables.Event]]]:
    """A consumer with a window of two holding e1 and e2; e3 waits on the channel."""
    with connect(server.url, namespace=namespace, **SETTINGS) as client:
        channel = client.channel("orders")
        dur = channel.durable("work", kind=kind)
        publish(channel, 2)
        with dur.consumer("one", prefetch=2) as one:
            held = one.fetch(timeout=1)
            channel.publish("e3")
            yield one, held


def test_an_ack_that_frees_a_full_window_wakes_the_consumers_own_fetch(
    server: RedisProcess, namespace: str, connect: Connect
) -> None:
    with holding_two(server, namespace, connect, "shared") as (one, (first, second)):
        with fetching(one) as joined:
            time.sleep(0.5)  # blocked: no room
            rung = bell_id(server, namespace)
            started = time.monotonic()
            first.ack()
            (third,) = joined()
            assert time.monotonic() - started < WOKEN_S
        assert texts([third]) == ["e3"] and bell_id(server, namespace) != rung
        third.ack()  # held with e2: the window was full again
        rung = bell_id(server, namespace)
        second.ack()  # one of two held: the window had room, nobody waits for this
        assert bell_id(server, namespace) == rung


def test_an_ack_that_ends_a_serial_line_wakes_the_fetch_waiting_for_it(
    server: RedisProcess, namespace: str, connect: Connect
) -> None:
    with (
        holding_two(server, namespace, connect, "serial") as (one, (first, second)),
        fetching(one) as joined,
    ):
        time.sleep(0.5)  # blocked: the line is held (by itself)
        rung = bell_id(server, namespace)
        first.ack()  # still holds e2: nothing can be dealt yet
        assert bell_id(server, namespace) == rung
        started = time.monotonic()
        second.ack()  # the line is free
        assert texts(joined()) == ["e3"]
        assert time.monotonic() - started < WOKEN_S
