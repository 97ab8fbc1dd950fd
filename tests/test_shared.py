"""Shared and serial durables: round robin, windows, rollback, crash recovery, dead letters."""

from __future__ import annotations

import os
import random
import signal
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from redis import Redis

import durables
from durables import ConfigError, InvalidWindowError
from durables.keys import ChannelKeys

from .children import first_line, python_child
from .conftest import FAST, Connect
from .helpers import fetch_all, publish
from .servers import RedisProcess

pytestmark = [pytest.mark.on_cluster, pytest.mark.both_clients]


def texts(events: list[durables.Event]) -> list[str]:
    return [e.text for e in events]


def test_two_shared_consumers_get_alternate_events_as_the_seed_says(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("work", kind="shared")
    with dur.consumer("one", prefetch=10) as one, dur.consumer("two", prefetch=10) as two:
        publish(channel, 10)
        first, second = one.fetch(timeout=2), two.fetch(timeout=2)
        assert texts(first) == ["e1", "e3", "e5", "e7", "e9"]
        assert texts(second) == ["e2", "e4", "e6", "e8", "e10"]
        assert dur.depth() == 0 and dur.transaction_depth() == 10


def test_round_robin_goes_on_where_it_stopped(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared")
    with dur.consumer("one") as one, dur.consumer("two") as two:
        publish(channel, 3)
        got_one = one.fetch(timeout=2)
        publish(channel, 3, start=4)
        got_two = two.fetch(timeout=2)
        got_one += one.fetch(timeout=2)
    assert texts(got_one) == ["e1", "e3", "e5"] and texts(got_two) == ["e2", "e4", "e6"]


def test_idle_consumers_take_events_published_one_at_a_time_in_ring_order(
    channel: durables.Channel,
) -> None:
    """Consumers blocked in their fetches, each woken by every event and racing to the
    dispatcher: events published one at a time still go round the ring exactly."""
    dur = channel.durable("work", kind="shared")
    got: list[tuple[str, str]] = []
    lock, stop = threading.Lock(), threading.Event()

    def loop(name: str, consumer: durables.Consumer) -> None:
        while not stop.is_set():
            for event in consumer.fetch(timeout=0.3):
                with lock:
                    got.append((name, event.text))

    with (
        dur.consumer("a", prefetch=5, auto_ack=True) as a,
        dur.consumer("b", prefetch=5, auto_ack=True) as b,
        dur.consumer("c", prefetch=5, auto_ack=True) as c,
    ):
        pairs = zip("abc", (a, b, c), strict=True)
        threads = [threading.Thread(target=loop, args=pair) for pair in pairs]
        for thread in threads:
            thread.start()
        try:
            for i in range(1, 13):
                channel.publish(f"e{i}")
                deadline = time.monotonic() + 5
                while len(got) < i and time.monotonic() < deadline:
                    time.sleep(0.005)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=5)
    assert [text for _, text in got] == [f"e{i}" for i in range(1, 13)]
    assert [name for name, _ in got] == ["a", "b", "c"] * 4
    channel.delete()  # taps included
    ns = channel.ctx.namespace
    assert channel.ctx.executor.redis.keys(f"{ns}:{{{channel.name}}}:*") == []


def _fetching(
    consumers: dict[str, durables.Consumer], timeout: float = 0.3
) -> tuple[list[tuple[str, str, float]], Callable[[], None]]:
    """Each consumer fetching in a thread of its own, blocking: what arrived (name, text,
    when), and a function that stops them."""
    got: list[tuple[str, str, float]] = []
    lock, stop = threading.Lock(), threading.Event()

    def loop(name: str, consumer: durables.Consumer) -> None:
        while not stop.is_set():
            for event in consumer.fetch(timeout=timeout):
                with lock:
                    got.append((name, event.text, time.monotonic()))

    threads = [threading.Thread(target=loop, args=pair) for pair in consumers.items()]
    for thread in threads:
        thread.start()

    def halt() -> None:
        stop.set()
        for thread in threads:
            thread.join(timeout=5)

    return got, halt


def _until_any(got: list[tuple[str, str, float]], deadline: float) -> None:
    """Wait until something arrived (`_fetching`) or the deadline passed."""
    while not got and time.monotonic() < deadline:
        time.sleep(0.005)


@contextmanager
def _three_waiting(
    channel: durables.Channel, timeout: float = 0.3
) -> Iterator[list[tuple[str, str, float]]]:
    """Consumers a, b and c of a shared durable, each fetching in a thread of its own (each
    fetch waiting up to `timeout`) and waiting (idle) by the time this yields what arrives
    (`_fetching`)."""
    dur = channel.durable("work", kind="shared")
    with (
        dur.consumer("a", prefetch=5, auto_ack=True) as a,
        dur.consumer("b", prefetch=5, auto_ack=True) as b,
        dur.consumer("c", prefetch=5, auto_ack=True) as c,
    ):
        got, halt = _fetching({"a": a, "b": b, "c": c}, timeout)
        try:
            time.sleep(0.5)  # all three waiting
            yield got
        finally:
            halt()


def test_an_event_published_to_idle_consumers_costs_one_consumers_work(
    connect: Connect, server_url: str, namespace: str
) -> None:
    """Idle consumers wait in reads of their own, and one at a time reads the channel: an
    event wakes that one, whose wait settles it, not every consumer, each running the
    dispatcher (which cost about five scripts per event with three consumers)."""
    # Only the events' scripts are counted: leases long enough that no heartbeat renews
    # one meanwhile, and waits long enough that none ends (a wait that ends without a
    # wake fetches through the dispatcher once). With the suite's 1 s leases and 0.3 s
    # waits the count grew with a slow run's length, not with the events.
    with connect(server_url, namespace=namespace, **{**FAST, "lease_timeout_s": 30.0}) as client:
        channel = client.channel("orders")
        redis = channel.ctx.executor.redis
        if not isinstance(redis, Redis):
            pytest.skip("the server's command counts are per node on a cluster")
        with _three_waiting(channel, timeout=4.0) as got:
            before = redis.info("commandstats")["cmdstat_evalsha"]["calls"]
            for i in range(1, 25):
                channel.publish(f"e{i}")
                deadline = time.monotonic() + 5
                while len(got) < i and time.monotonic() < deadline:
                    time.sleep(0.002)
            scripts = redis.info("commandstats")["cmdstat_evalsha"]["calls"] - before
    assert [name for name, _, _ in got] == ["a", "b", "c"] * 8
    # each event: its publish, the taker's settling and its joining the waiters again
    assert scripts / 24 < 3.6


def test_a_burst_to_idle_waiting_consumers_is_dealt_round_robin(
    channel: durables.Channel,
) -> None:
    """Idle consumers wait in reads of their own, one of them reading the channel: a burst
    it takes whole is dealt round the ring as the dispatcher would deal it."""
    with _three_waiting(channel) as got:
        for start in (1, 7):
            publish(channel, 6, start=start)
            deadline = time.monotonic() + 5
            while len(got) < start + 5 and time.monotonic() < deadline:
                time.sleep(0.005)
    by = {name: [text for who, text, _ in got if who == name] for name in "abc"}
    assert by == {
        "a": ["e1", "e4", "e7", "e10"],
        "b": ["e2", "e5", "e8", "e11"],
        "c": ["e3", "e6", "e9", "e12"],
    }


def test_a_consumer_that_stops_asking_does_not_hold_up_the_others(
    channel: durables.Channel,
) -> None:
    """The head of the ring waits once, then stops asking: its events are dealt to it all
    the same (round robin), and the next consumer gets the next event at once."""
    dur = channel.durable("work", kind="shared")
    with (
        dur.consumer("a", prefetch=5, auto_ack=True) as a,
        dur.consumer("b", prefetch=5, auto_ack=True) as b,
    ):
        assert a.fetch(timeout=0.2) == []  # it waited, and stops asking
        got, halt = _fetching({"b": b}, timeout=2)
        try:
            time.sleep(0.3)
            channel.publish("e1")  # a's turn: dealt to it, though it does not ask
            sent = time.monotonic()
            channel.publish("e2")
            _until_any(got, sent + 5)
        finally:
            halt()
        assert [(who, text) for who, text, _ in got] == [("b", "e2")]
        assert got[0][2] - sent < 0.5  # not after a wait ran out
        assert texts(a.fetch(timeout=2)) == ["e1"]


def test_window_caps_what_a_consumer_holds_and_ack_makes_room(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared")
    publish(channel, 10)
    with dur.consumer("one", prefetch=3) as one:
        got = one.fetch(timeout=1)
        assert texts(got) == ["e1", "e2", "e3"]
        assert one.fetch(timeout=0.3) == []  # window full: nothing more
        assert dur.depth() == 7 and dur.transaction_depth() == 3
        got[0].ack()
        assert texts(one.fetch(timeout=1)) == ["e4"]
        one.commit()
        assert texts(one.fetch(timeout=1)) == ["e5", "e6", "e7"]
        assert dur.depth() == 3 and dur.transaction_depth() == 3


def test_a_window_means_no_auto_ack_and_none_means_auto_ack(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared")
    publish(channel, 2)
    with dur.consumer("one", prefetch=5) as c:
        assert c.auto_ack is False
        fetch_all(c, 2)
    assert dur.transaction_depth() == 0 and dur.depth() == 2  # handed back on close
    with dur.consumer("two") as c:
        assert c.auto_ack is True
        fetch_all(c, 2)
    assert dur.transaction_depth() == 0 and dur.depth() == 0


def test_window_arguments_are_checked(channel: durables.Channel, client: durables.Client) -> None:
    dur = channel.durable("work", kind="shared")
    for bad in (0, -1, True, "4"):
        with pytest.raises(InvalidWindowError):
            dur.consumer(prefetch=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidWindowError):
        dur.subscribe(lambda e: None, window=0)
    sub = dur.subscribe(lambda e: None, window=-1)  # negative: the default window
    try:
        assert sub.consumer.reader.window == client.settings.client_queue_window  # type: ignore[attr-defined]
        assert sub.consumer.auto_ack is False
    finally:
        sub.close()


def test_shared_rollback_redelivers_at_once_with_count_and_flag(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("work", kind="shared")
    publish(channel, 3)
    with dur.consumer("one", prefetch=3) as c:
        got = c.fetch(timeout=1)
        got[1].rollback()
        again = c.fetch(timeout=1)
        assert [(e.text, e.redelivered, e.redelivery_count) for e in again] == [("e2", True, 1)]
        again[0].rollback()
        third = c.fetch(timeout=1)
        assert [(e.text, e.redelivery_count) for e in third] == [("e2", 2)]
        assert dur.depth() == 0 and dur.transaction_depth() == 3
        c.commit()  # e1, e3 and the redelivered e2
    assert dur.depth() == 0 and dur.transaction_depth() == 0


def test_unacknowledged_events_come_back_marked_after_a_clean_close(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("work", kind="shared")
    publish(channel, 3)
    with dur.consumer("one", prefetch=2) as c:
        assert texts(c.fetch(timeout=1)) == ["e1", "e2"]  # handed out, never acked
    with dur.consumer("two", prefetch=5) as c:
        back = c.fetch(timeout=1)
        assert [(e.text, e.redelivery_count) for e in back] == [("e1", 1), ("e2", 1), ("e3", 0)]


def test_rolled_back_event_is_first_in_line_for_any_consumer(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared")
    one = dur.consumer("one", prefetch=1)
    with dur.consumer("two", prefetch=1) as two:
        with one:
            publish(channel, 3)
            (a,) = one.fetch(timeout=1)
            (b,) = two.fetch(timeout=1)
            assert (a.text, b.text) == ("e1", "e2")
            a.rollback()
        b.ack()
        (c,) = two.fetch(timeout=1)  # e1 goes before e3, to whoever has room
        assert (c.text, c.redelivered) == ("e1", True)


def test_delayed_rollback_is_honoured(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared")
    publish(channel, 1)
    with dur.consumer("one", prefetch=2) as c:
        (event,) = c.fetch(timeout=1)
        rolled = time.monotonic()
        event.rollback(delay=0.6)
        (again,) = fetch_all(c, 1, timeout=3)  # not before the delay, however long fetches take
        assert time.monotonic() - rolled >= 0.6
        assert again.text == "e1" and again.redelivery_count == 1
        with pytest.raises(ConfigError):
            again.rollback(delay=-1)


def test_events_go_to_the_dead_letters_after_max_deliveries(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared", max_deliveries=3)
    publish(channel, 2)
    with dur.consumer("one", prefetch=5) as c:
        deliveries = 0
        for _ in range(10):
            got = [e for e in c.fetch(timeout=0.5) if e.text == "e1"]
            if not got:
                break
            deliveries += 1
            got[0].rollback()
        c.commit()
    assert deliveries == 3
    dead = dur.dead_letters()
    assert [(d.text, d.origin_id, d.reason, d.deliveries) for d in dead] == [
        ("e1", dead[0].origin_id, "max_deliveries", 3)
    ]
    assert dur.depth() == 0 and dur.transaction_depth() == 0
    assert dur.replay_dead_letters() == 1
    with dur.consumer("two") as c:
        (again,) = fetch_all(c, 1)
    assert again.text == "e1" and not again.redelivered
    assert dur.dead_letters() == []


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
    processed: list[str] = []
    holding: set[str] = set()
    overlaps: list[set[str]] = []
    lock = threading.Lock()
    rng = random.Random(7)

    def worker(name: str) -> Callable[[durables.Event], None]:
        def listener(event: durables.Event) -> None:
            with lock:
                holding.add(name)
                if len(holding) > 1:
                    overlaps.append(set(holding))
                processed.append(event.text)
            time.sleep(rng.random() * 0.01)
            with lock:
                holding.discard(name)
            event.ack()

        return listener

    subs = [dur.subscribe(worker(n), window=1, name=n) for n in ("a", "b", "c")]
    try:
        publish(channel, 60)
        deadline = time.monotonic() + 20
        while len(processed) < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        for sub in subs:
            sub.close()
    assert processed == [f"e{i}" for i in range(1, 61)]
    assert overlaps == []


CRASHER = textwrap.dedent(
    """
    import sys, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=1.0)
    dur = client.channel("orders").durable("work", kind="shared")
    c = dur.consumer("doomed", prefetch=5)
    got = []
    while len(got) < 5:
        got += c.fetch(timeout=1)
    print(" ".join(e.text for e in got), flush=True)
    sys.stdin.read()
    """
)


WATCHER = textwrap.dedent(
    """
    import sys, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=60.0)
    dur = client.channel("orders").durable("work", kind="shared")
    c = dur.consumer("doomed", prefetch=5, auto_ack=True)
    print("attached", flush=True)
    while True:
        c.fetch(timeout=5)
    """
)


def test_a_consumer_killed_while_it_watches_holds_the_others_up_no_longer_than_a_wait(
    server_url: str, namespace: str, channel: durables.Channel
) -> None:
    """The first idle consumer in the ring is woken to watch the channel; killed while it
    watches, its mark lasts until its tap expires, but the others' waits still end in a
    fetch through the dispatcher, which deals on (its turn to it, as the round robin says)."""
    dur = channel.durable("work", kind="shared")
    with python_child(WATCHER, server_url, namespace) as proc:
        assert first_line(proc) == "attached"  # first in the ring
        with dur.consumer("survivor", prefetch=5, auto_ack=True) as survivor:
            got, halt = _fetching({"survivor": survivor})
            try:
                time.sleep(0.8)  # both waiting, the doomed one watching
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                sent = time.monotonic()
                publish(channel, 2)  # e1 is the doomed one's turn, e2 the survivor's
                _until_any(got, sent + 10)
            finally:
                halt()
    assert [(who, text) for who, text, _ in got] == [("survivor", "e2")]
    assert got[0][2] - sent < 0.6  # within a wait (0.3 s), not the dead watcher's tap life


def crash_holding_a_window(
    server_url: str, namespace: str, channel: durables.Channel, events: int
) -> list[str]:
    """Run a consumer process that takes a window of 5 events, then kill -9 it;
    returns the events it held."""
    with python_child(CRASHER, server_url, namespace) as proc:
        publish(channel, events)
        held = first_line(proc).split()
        os.kill(proc.pid, signal.SIGKILL)
    return held


def test_consumer_killed_with_kill9_while_holding_its_window_loses_nothing(
    server_url: str, namespace: str, channel: durables.Channel
) -> None:
    dur = channel.durable("work", kind="shared")
    held = crash_holding_a_window(server_url, namespace, channel, 20)
    assert len(held) == 5
    seen: dict[str, int] = {}
    with dur.consumer("survivor", prefetch=50) as c:
        deadline = time.monotonic() + 10
        while len(seen) < 20 and time.monotonic() < deadline:
            for event in c.fetch(timeout=0.3):
                seen[event.text] = event.redelivery_count
                event.ack()
    assert sorted(seen) == sorted(f"e{i}" for i in range(1, 21))
    assert {t for t, count in seen.items() if count == 1} == set(held)
    assert dur.depth() == 0 and dur.transaction_depth() == 0


PAUSED = textwrap.dedent(
    """
    import sys, time, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=1.0,
                              block_s=0.2)
    dur = client.channel("orders").durable("work", kind=sys.argv[3])
    with dur.consumer("paused", prefetch=5) as c:
        held = []
        while len(held) < 5:
            held += c.fetch(timeout=1)
        print(" ".join(e.text for e in held), flush=True)
        sys.stdin.readline()  # stopped here (SIGSTOP) past its lease, then told to go on
        for event in held:
            event.ack()  # late: its events went to the other consumer meanwhile
        print("acked", flush=True)
        got, deadline = [], time.monotonic() + 15
        while len(got) < int(sys.argv[4]) and time.monotonic() < deadline:
            for event in c.fetch(timeout=0.5):
                got.append(f"{event.text}:{event.redelivery_count}")
                event.ack()
        print(" ".join(got), flush=True)
    """
)


@pytest.mark.parametrize("kind", ["shared", "serial"])
def test_a_consumer_paused_past_its_lease_loses_nothing_and_takes_events_again_after(
    server_url: str, namespace: str, channel: durables.Channel, kind: durables.Kind
) -> None:
    """A consumer process stopped (SIGSTOP) while it holds its window: the other consumer
    gets those events, flagged, once the lease lapses; resumed, the stopped one acknowledges
    late without harm and joins again. Counted: published, delivered, lost, duplicated."""
    dur = channel.durable("work", kind=kind)
    after = 5  # published once the stopped consumer is back and alone
    with python_child(PAUSED, server_url, namespace, kind, str(after)) as proc:
        publish(channel, 10)
        held = first_line(proc).split()
        assert held == [f"e{i}" for i in range(1, 6)]
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            survivor: list[durables.Event] = []
            with dur.consumer("survivor", prefetch=50) as c:
                deadline = time.monotonic() + 10
                while len(survivor) < 10 and time.monotonic() < deadline:
                    for event in c.fetch(timeout=0.3):
                        survivor.append(event)
                        event.ack()
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert first_line(proc) == "acked"
        publish(channel, after, start=11)
        resumed = first_line(proc).split()
    published = [f"e{i}" for i in range(1, 11 + after)]
    seen = [e.text for e in survivor]
    # the survivor: all ten, nothing twice; the stopped one's five flagged as redelivered
    assert sorted(seen, key=lambda t: int(t[1:])) == published[:10]
    assert {e.text for e in survivor if e.redelivered} == set(held)
    if kind == "serial":  # the line passed whole: its window first, then on in order
        assert seen == published[:10]
    # back and alone, the stopped consumer gets every later event, in order, unflagged
    assert resumed == [f"{t}:0" for t in published[10:]]
    # lost: none; duplicated: only the window held across the pause (delivered to both)
    assert set(seen) | set(held) | {r.split(":")[0] for r in resumed} == set(published)
    assert dur.depth() == 0 and dur.transaction_depth() == 0


def test_durable_filter_on_shared_keeps_non_matching_events_away(
    client: durables.Client, channel: durables.Channel
) -> None:
    dur = channel.durable("eu", kind="shared", filter="region = 'eu' AND qty > 2")
    msgs = [
        durables.Message(f"e{i}", properties={"region": "eu" if i % 2 else "us", "qty": i})
        for i in range(1, 11)
    ]
    channel.publish_many(msgs)
    assert dur.depth() == 4  # e3, e5, e7, e9
    with dur.consumer("one") as c:
        assert texts(fetch_all(c, 4)) == ["e3", "e5", "e7", "e9"]
        assert c.fetch(timeout=0.2) == []
    client.housekeep()
    assert channel.info().length == 0  # non-matching events did not hold back retention


def props_msgs(*regions: str) -> list[durables.Message]:
    return [durables.Message(f"e{i}", properties={"region": r}) for i, r in enumerate(regions, 1)]


def test_a_consumer_takes_only_events_its_own_filter_matches(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared")
    with dur.consumer("eu", prefetch=10, filter="region = 'eu'") as eu:
        channel.publish_many(props_msgs("eu", "us", "eu"))
        assert texts(eu.fetch(timeout=1)) == ["e1", "e3"]
    # the first consumer's filter decided what the durable kept: e2 was dropped
    assert dur.depth() == 2 and dur.transaction_depth() == 0


def test_the_latest_consumer_filter_governs_the_store_and_earlier_ones_are_notified(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("work", kind="shared")
    heard: list[str] = []
    first = dur.consumer(
        "first", prefetch=10, filter="region IN ('eu', 'us')", on_notice=heard.append
    )
    with first:
        with dur.consumer("second", prefetch=10, filter="region = 'us'") as second:
            channel.publish_many(props_msgs("eu", "us", "asia", "us"))
            got_first, got_second = first.fetch(timeout=1), second.fetch(timeout=1)
            # the store keeps only 'us' events now; each consumer still uses its own filter
            assert texts(got_first) + texts(got_second) == ["e2", "e4"]
            assert len(heard) == 1 and "second" in heard[0] and first.notices == heard
            assert second.notices == []
            first.commit()
            second.commit()
        # a third consumer without a filter leaves the second's filter in effect
        with dur.consumer("third", prefetch=10) as third:
            channel.publish_many(props_msgs("eu", "us"))
            got = first.fetch(timeout=1) + third.fetch(timeout=1)
            assert [e.properties["region"] for e in got] == ["us"]


def test_the_store_filter_resets_when_the_last_consumer_leaves(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared")
    with dur.consumer("picky", filter="region = 'eu'"):
        pass
    with dur.consumer("anyone", prefetch=10) as c:
        channel.publish_many(props_msgs("eu", "us"))
        assert texts(c.fetch(timeout=1)) == ["e1", "e2"]


def test_an_exclusive_consumer_filter_skips_what_it_does_not_match(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("audit")
    channel.publish_many(props_msgs("eu", "us", "eu"))
    with dur.consumer(filter="region = 'eu'") as c:
        assert texts(fetch_all(c, 2)) == ["e1", "e3"]
    assert dur.depth() == 0 and dur.transaction_depth() == 0


def test_housekeeping_hands_back_the_events_of_a_dead_consumer_nobody_else_fetches(
    server_url: str, namespace: str, client: durables.Client, channel: durables.Channel
) -> None:
    dur = channel.durable("work", kind="shared")
    assert len(crash_holding_a_window(server_url, namespace, channel, 5)) == 5
    assert dur.transaction_depth() == 5
    time.sleep(1.2)  # the dead consumer's lease lapses
    client.housekeep()
    assert dur.transaction_depth() == 0 and dur.depth() == 5
    assert dur.info().consumers == ()
