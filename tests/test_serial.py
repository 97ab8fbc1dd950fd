"""Serial durables: one consumer holds the line at a time, the line passes when the
holder stops asking or is detached, and processing order is publish order."""

from __future__ import annotations

import random
import threading
import time

import pytest

import durables
from durables.keys import ChannelKeys

from .conftest import FAST, Connect
from .helpers import Line, fetch_all, publish, texts
from .servers import RedisProcess

pytestmark = [pytest.mark.on_cluster, pytest.mark.both_clients]


def test_serial_never_lets_two_consumers_hold_events_at_once(channel: durables.Channel) -> None:
    dur = channel.durable("line", kind="serial")
    with dur.consumer("one", prefetch=2) as one, dur.consumer("two", prefetch=2) as two:
        publish(channel, 6)
        first = one.fetch(timeout=1)
        assert texts(first) == ["e1", "e2"]
        assert two.fetch(timeout=0.3) == []  # one still holds e1, e2
        one.commit()
        assert texts(two.fetch(timeout=1)) == ["e3", "e4"]
        assert one.fetch(timeout=0.3) == []
        two.commit()
        assert texts(one.fetch(timeout=1)) == ["e5", "e6"]


def test_serial_waiter_takes_the_line_when_the_holder_stops_asking(
    channel: durables.Channel,
) -> None:
    """A serial consumer that found the line taken waits for the bell, not for every new
    event; once the holder stops asking, the waiter still gets what comes next."""
    dur = channel.durable("line", kind="serial")
    with (
        dur.consumer("one", prefetch=2, auto_ack=True) as one,
        dur.consumer("two", prefetch=2, auto_ack=True) as two,
    ):
        publish(channel, 2)
        assert texts(one.fetch(timeout=1)) == ["e1", "e2"]
        got: list[durables.Event] = []
        waiter = threading.Thread(target=lambda: got.extend(two.fetch(timeout=6)))
        waiter.start()  # finds the line taken: one holds e1, e2
        assert one.fetch(timeout=0.5) == []  # acks them, holds its tap a while, stops asking
        channel.publish("e3")
        started = time.monotonic()
        waiter.join(timeout=8)
        assert texts(got) == ["e3"]
        assert time.monotonic() - started < 4  # within about a block time, not the timeout
        assert texts(one.fetch(timeout=0.3)) == []


def test_a_serial_consumer_detached_while_its_tap_was_open_reads_nothing_through_it(
    server: RedisProcess, namespace: str, connect: Connect
) -> None:
    """A tap outlives the read that opened it (its reader renews it with each read), so a
    member detached for a lapsed lease (paused, say) must find its tap closed: reading
    new events through it would hold them beside the member that took the line."""
    # only the lapse this test makes; taps that outlive the test's steps
    settings = {**FAST, "lease_timeout_s": 30.0, "block_s": 5.0, "socket_timeout_s": 10.0}
    with connect(server.url, namespace=namespace, **settings) as client:
        channel = client.channel("orders")
        dur = channel.durable("line", kind="serial")
        one = dur.consumer("one", prefetch=2)
        two = dur.consumer("two", prefetch=2)
        try:
            channel.publish("e1")
            (first,) = one.fetch(timeout=3)  # through its tap, open 3 s and more
            first.ack()
            alive = ChannelKeys(namespace, "orders").alive("line")
            with server.client() as raw:
                (member,) = [m for m in raw.zrange(alive, 0, -1) if m.startswith(b"one#")]
                raw.zadd(alive, {member: 0})  # its lease lapsed, as after a long pause
            channel.publish("e2")
            (second,) = two.fetch(timeout=1)  # detaches one, takes the line
            assert second.text == "e2"
            channel.publish("e3")
            assert one.fetch(timeout=0.5) == []  # not e3: two holds the line
            second.ack()
            assert texts(fetch_all(two, 1)) == ["e3"]
        finally:
            one.close()
            two.close()


def test_serial_processing_order_equals_publish_order_with_three_consumers(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("line", kind="serial")
    rng = random.Random(7)
    line = Line(lambda: rng.random() * 0.01)
    processed = line.processed
    subs = [dur.subscribe(line.listener(n), window=1, name=n) for n in ("a", "b", "c")]
    try:
        publish(channel, 60)
        deadline = time.monotonic() + 20
        while len(processed) < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        for sub in subs:
            sub.close()
    assert processed == [f"e{i}" for i in range(1, 61)]
    assert line.overlaps == []


def test_two_serial_consumers_that_keep_asking_see_the_line_stay_with_one_of_them(
    channel: durables.Channel,
) -> None:
    """What docs/concepts.md says two consumers see: which waiting consumer takes an idle
    line is not first come, first served; the one that has it keeps it while it keeps
    asking (fetch, commit, fetch again), and the other gets nothing meanwhile."""
    dur = channel.durable("line", kind="serial")
    got: dict[str, list[str]] = {"one": [], "two": []}
    stop = threading.Event()

    def worker(consumer: durables.Consumer, name: str) -> None:
        while not stop.is_set():
            events = consumer.fetch(timeout=0.3)
            got[name] += texts(events)
            consumer.commit()

    with (
        dur.consumer("one", prefetch=2, auto_ack=False) as one,
        dur.consumer("two", prefetch=2, auto_ack=False) as two,
    ):
        threads = [
            threading.Thread(target=worker, args=(c, n)) for c, n in ((one, "one"), (two, "two"))
        ]
        for thread in threads:
            thread.start()
        try:
            time.sleep(0.3)  # both asking
            for i in range(1, 21):
                channel.publish(f"e{i}")
                time.sleep(0.02)
            deadline = time.monotonic() + 10
            while len(got["one"]) + len(got["two"]) < 20 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
    holder, other = sorted(got.values(), key=len, reverse=True)
    assert holder == [f"e{i}" for i in range(1, 21)]
    assert other == []
