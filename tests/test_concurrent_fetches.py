"""Threads (or asyncio tasks) that fetch from one consumer take turns, and one may close it.

A consumer's reader is one state machine: two fetches interleaving their round trips
handed one read's reply to the other's state (shared and serial consumers failed with
unpacking errors) and let an exclusive holder's cumulative acknowledgement pass events
another fetch had read and not yet handed out (66 of 3,000 lost in a probe). Each fetch
now waits, within its own timeout, for the one under way. And a consumer closed while
another thread waits in its fetch lets go of the durable: that fetch no longer attaches
again when the close wakes it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

import durables

from .conftest import Connect

pytestmark = pytest.mark.both_clients

EVENTS = 1500
THREADS = 3
QUIET_S = 2.0
"""Once all is published, the threads stop after this long without an event."""


@pytest.mark.parametrize("kind", ["exclusive", "shared", "serial", "keyed"])
def test_threads_fetching_from_one_consumer_get_every_event_once(
    connect: Connect, server_url: str, namespace: str, kind: durables.Kind
) -> None:
    """Events come in small batches while three threads fetch, reading a few at a time."""
    with connect(server_url, namespace=namespace, read_batch=5) as client:
        channel = client.channel("orders")
        durable = channel.durable("work", kind=kind)
        seen, errors = _fetched_by_threads(
            channel, durable, prefetch=None if kind == "exclusive" else 5
        )
        print(f"{kind}: {len(seen)} of {EVENTS} delivered, {seen.total()} deliveries, {errors}")
        assert errors == []
        assert seen == Counter(range(EVENTS))  # each once
        assert durable.depth() == 0 and durable.transaction_depth() == 0


def _fetched_by_threads(
    channel: durables.Channel, durable: durables.Durable, prefetch: int | None
) -> tuple[Counter[int], list[BaseException]]:
    """What THREADS threads fetching from one consumer got (number -> times), and their
    errors, while the events are published in batches of ten."""
    seen: Counter[int] = Counter()
    errors: list[BaseException] = []
    lock = threading.Lock()
    published, quiet = threading.Event(), [time.monotonic()]
    with durable.consumer("c", auto_ack=False, prefetch=prefetch) as consumer:

        def work() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with lock:
                    if seen.total() >= EVENTS or errors:
                        return
                    if published.is_set() and time.monotonic() - quiet[0] > QUIET_S:
                        return  # the rest is not coming
                try:
                    got = consumer.fetch(timeout=0.05)
                    with lock:
                        seen.update(int(event.text) for event in got)
                        quiet[0] = time.monotonic() if got else quiet[0]
                    for event in got:
                        event.ack()
                except BaseException as exc:  # reported by the test
                    with lock:
                        errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        for start in range(0, EVENTS, 10):
            channel.publish_many(
                [durables.Message(str(n), key=f"k{n % 13}") for n in range(start, start + 10)]
            )
        published.set()
        for thread in threads:
            thread.join(60)
    return seen, errors


def test_a_fetch_waiting_for_its_turn_returns_within_its_own_timeout(
    channel: durables.Channel,
) -> None:
    """One thread waits 2 s in a fetch on an empty durable; another's fetch of 0.2 s ends
    after about 0.2 s with nothing, not after the first one's wait."""
    durable = channel.durable("work", kind="shared")
    with durable.consumer("c", prefetch=4) as consumer:
        waiting = threading.Thread(target=consumer.fetch, kwargs={"timeout": 2.0})
        waiting.start()
        time.sleep(0.3)  # the first fetch is under way, blocked
        started = time.monotonic()
        assert consumer.fetch(timeout=0.2) == []
        took = time.monotonic() - started
        waiting.join(10)
    print(f"the second fetch took {took:.2f} s")
    assert took < 1.0


@pytest.mark.parametrize("kind", ["exclusive", "shared", "serial", "keyed"])
def test_a_consumer_closed_while_another_thread_waits_in_fetch_lets_go_of_the_durable(
    channel: durables.Channel, kind: durables.Kind
) -> None:
    """The usual shutdown: a worker thread waits in fetch(), the main thread closes the
    consumer. The close wakes the wait (its lease or its membership is gone), and the
    fetch must not attach again: a closed consumer that did held the durable's lease, or
    a window of its events, for as long as the client ran. The next consumer attaches at
    once and gets every event."""
    durable = channel.durable("work", kind=kind)
    prefetch = None if kind == "exclusive" else 8
    consumer = durable.consumer("old", prefetch=prefetch)
    got: list[list[durables.Event]] = []
    waiting = threading.Thread(target=lambda: got.append(consumer.fetch(timeout=3.0)))
    waiting.start()
    time.sleep(0.5)  # blocked in its read by now
    consumer.close()
    waiting.join(10)
    attached = durable.info().consumers
    with durable.consumer("new", prefetch=prefetch) as heir:
        channel.publish_many([durables.Message(str(n), key=f"k{n}") for n in range(5)])
        numbers = [int(e.text) for e in heir.fetch(timeout=2.0)]
        for _ in range(10):
            if len(numbers) >= 5:
                break
            numbers += [int(e.text) for e in heir.fetch(timeout=0.5)]
    print(f"{kind}: the closed consumer's fetch returned {got}; attached after: {attached}")
    assert got == [[]]
    assert attached == ()
    assert sorted(numbers) == list(range(5))
