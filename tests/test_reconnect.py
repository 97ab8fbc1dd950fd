"""Riding through faults: a server killed (kill -9) and restarted under running consumers,
subscriptions and sessions; they go on by themselves and nothing published is lost."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

import durables
from durables.io.recovery import PROBE, RENEW, Backoff, Link, waiting

from .conftest import FAST, Connect
from .helpers import fetch_loops, wait_for
from .servers import RedisProcess

pytestmark = [pytest.mark.slow, pytest.mark.both_clients]
OUTAGE_S = 1.0


@dataclass
class Seen:
    """What one receiver got, in order, with the redelivered flag."""

    ids: list[str] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, event: durables.Event) -> None:
        with self.lock:
            self.ids.append(event.id)
            if event.redelivered:
                self.flagged.append(event.id)

    def check(self, published: list[str], *, ordered: bool) -> str:
        """Nothing lost; duplicates only flagged ones; in order where promised. A summary."""
        with self.lock:
            got = list(self.ids)
        lost = set(published) - set(got)
        firsts = list(dict.fromkeys(got))
        duplicated = len(got) - len(firsts)
        assert not lost, f"lost {len(lost)}: {sorted(lost)[:5]}"
        if ordered:
            assert firsts == [i for i in published if i in set(firsts)], "reordered"
        summary = (
            f"published={len(published)} delivered={len(got)} lost={len(lost)} "
            f"duplicated={duplicated} flagged={len(self.flagged)}"
        )
        print(summary)
        return summary


class Listener:
    def __init__(self) -> None:
        self.seen = Seen()

    def on_event(self, event: durables.Event) -> None:
        self.seen.add(event)


def test_consumers_subscriptions_and_sessions_ride_through_a_server_restart(
    fresh_server: RedisProcess, namespace: str, connect: Connect
) -> None:
    settings = {**FAST, "reconnect_timeout_s": 30.0}
    with connect(fresh_server.url, namespace=namespace, **settings) as client:
        states: list[tuple[str, str]] = []
        client.on_state(lambda old, new: states.append((old, new)))
        ch = client.channel("orders")
        shared = ch.durable("workers", kind="shared")
        exclusive = ch.durable("audit", kind="exclusive")
        session_listener = Listener()
        session = client.session("mobile", timeout=60)
        session_states: list[tuple[str, str]] = []
        session.on_state(lambda old, new: session_states.append((old, new)))
        session.register_interest("orders")
        session.add_listener("orders", session_listener)
        session.ready_for_events()

        sub_seen = Seen()
        sub = shared.subscribe(sub_seen.add)
        loop_seen, stop = Seen(), threading.Event()

        def exclusive_loop() -> None:
            with exclusive.consumer("loop") as consumer:
                while not stop.is_set():
                    for event in consumer.fetch(timeout=0.2):
                        loop_seen.add(event)

        loop = threading.Thread(target=exclusive_loop, daemon=True)
        loop.start()

        published = [ch.publish(f"before-{i}") for i in range(100)]
        assert wait_for(lambda: len(loop_seen.ids) >= 100 and len(sub_seen.ids) >= 100)
        fresh_server.kill9()
        time.sleep(OUTAGE_S)
        fresh_server.restart()
        published += [ch.publish(f"after-{i}") for i in range(100)]  # waits out the restart

        everyone = (sub_seen, loop_seen, session_listener.seen)
        assert wait_for(lambda: all(set(published) <= set(s.ids) for s in everyone))
        stop.set()
        loop.join(10)
        assert sub.error is None
        sub.close()
        sub_seen.check(published, ordered=False)
        loop_seen.check(published, ordered=True)
        session_listener.seen.check(published, ordered=True)
        assert ("connected", "reconnecting") in states and states[-1] == (
            "reconnecting",
            "connected",
        )
        assert session_states[:2] == [("connected", "disconnected"), ("disconnected", "connected")]
        assert session.state == "connected" and client.state == "connected"
        session.close()


def test_fetch_waits_out_an_outage_within_its_timeout(
    fresh_server: RedisProcess, namespace: str, connect: Connect
) -> None:
    with connect(
        fresh_server.url, namespace=namespace, **{**FAST, "reconnect_timeout_s": 30.0}
    ) as client:
        ch = client.channel("orders")
        dur = ch.durable("audit")
        with dur.consumer() as consumer:
            fresh_server.kill9()
            started = time.monotonic()
            assert consumer.fetch(timeout=0.5) == []  # the server is away: nothing, no error
            assert time.monotonic() - started < 5
            assert client.state == "reconnecting"
            fresh_server.restart()
            eid = ch.publish("back")
            got = consumer.fetch(timeout=5)
            assert [e.id for e in got] == [eid]


def test_a_recovery_whose_scripts_did_not_load_waits_on_for_a_reconnection() -> None:
    """The probe answered, but loading the scripts met the outage again: that is no
    reconnection (the epoch is the same, and a reader told the server answers would read
    on without attaching again, past a read whose reply was lost). The wait probes on,
    and ends once a renewal reconnects."""
    link = Link(60.0)
    link.lost()
    wait = waiting(link, None)
    assert next(wait) == PROBE
    assert wait.send(True) == RENEW  # the server answers: renew the pool, load the scripts
    assert isinstance(wait.send(None), Backoff)  # they did not load: still reconnecting
    assert wait.send(None) == PROBE
    assert wait.send(True) == RENEW
    link.reconnected()  # they loaded this time
    with pytest.raises(StopIteration) as done:
        wait.send(None)
    assert done.value.value is True and link.epoch == 1


def test_past_reconnect_timeout_a_subscription_ends_with_connection_lost(
    fresh_server: RedisProcess, namespace: str, connect: Connect
) -> None:
    with connect(
        fresh_server.url, namespace=namespace, **{**FAST, "reconnect_timeout_s": 1.0}
    ) as client:
        dur = client.channel("orders").durable("workers", kind="shared")
        sub = dur.subscribe(lambda event: None)
        fresh_server.kill9()
        assert sub.wait(15), "the subscription should end once reconnect_timeout_s passed"
        assert isinstance(sub.error, durables.ConnectionLostError)
        assert client.state == "closed"


def test_readers_a_session_and_a_producer_ride_through_a_paused_server(
    fresh_server: RedisProcess, namespace: str, connect: Connect
) -> None:
    """The server stopped (SIGSTOP) for 2 s, as by a stalled machine: connections stay
    open and nothing answers. Consumers of each kind, a session and a producer go on by
    themselves once it resumes: nothing lost, duplicates only flagged, order kept where
    promised, and publishes whose replies the pause swallowed stored once (message ids)."""
    with connect(
        fresh_server.url, namespace=namespace, **{**FAST, "reconnect_timeout_s": 30.0}
    ) as client:
        ch = client.channel("orders")
        seen = {kind: Seen() for kind in ("exclusive", "serial", "shared", "session")}
        session = client.session("stalled", timeout=60)
        session.register_interest("orders")
        listener = Listener()
        listener.seen = seen["session"]
        session.add_listener("orders", listener)
        session.ready_for_events()
        kinds: tuple[durables.Kind, ...] = ("exclusive", "serial", "shared")
        loops = {kind: seen[kind].add for kind in kinds}
        try:
            with fetch_loops(ch, loops):
                published = [ch.publish(f"before-{i}", message_id=f"m{i}") for i in range(20)]
                assert wait_for(lambda: all(set(published) <= set(s.ids) for s in seen.values()))
                fresh_server.pause()
                during: list[str] = []
                producer = threading.Thread(  # waits the pause out
                    target=lambda: during.extend(
                        ch.publish(f"during-{i}", message_id=f"m{20 + i}") for i in range(10)
                    ),
                    daemon=True,
                )
                producer.start()
                time.sleep(2.0)
                fresh_server.resume()
                producer.join(20)
                assert len(during) == 10
                published += during
                published += [ch.publish(f"after-{i}", message_id=f"m{30 + i}") for i in range(10)]
                everything = lambda: all(set(published) <= set(s.ids) for s in seen.values())  # noqa: E731
                assert wait_for(everything), {
                    k: len(set(published) - set(s.ids)) for k, s in seen.items()
                }
                time.sleep(0.3)
        finally:
            session.close()
        raw: Any = client.redis
        stored = [fields[b"d"] for _, fields in raw.xrange(client.keys("orders").stream)]
        assert len(stored) == len(set(stored)) == 40  # each publish stored once
        for kind, got in seen.items():
            print(kind, end=": ")
            got.check(published, ordered=kind != "shared")
        assert client.state == "connected"
