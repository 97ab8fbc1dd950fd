"""A producer in a tight loop and readers of every kind, through every fault at once: the
server killed (kill -9, AOF always) and restarted, the network black-holed past the lease,
stalled (requests held, landing after their retries) and reset, and (with Sentinel) the
primary killed twice. Per reader, the run prints what was attempted, confirmed, stored,
delivered, lost, duplicated (flagged or not) and reordered, and asserts: nothing confirmed
lost, nothing stored twice, no duplicate unflagged, no reordering where order is promised.
Bounded: a few seconds per fault."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import durables

from .checker import Checker
from .conftest import FAST, SERVER_KIND
from .faultproxy import FaultProxy
from .ha_sentinel import SentinelSet
from .helpers import fetch_loops
from .servers import RedisProcess, server_binary

pytestmark = pytest.mark.slow
SETTINGS = {**FAST, "reconnect_timeout_s": 60.0}
ORDERED = ("exclusive", "serial", "session")
"""Readers whose order is promised (a shared durable deals round robin, in no order)."""


@dataclass
class Run:
    """The producer and the readers of one run, each reader with a checker of its own."""

    checkers: dict[str, Checker] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    failures: Counter[str] = field(default_factory=Counter)
    discarded: dict[str, Callable[[], int]] = field(default_factory=dict)

    def produce(self, channel: durables.Channel, replicas: int) -> None:
        """Publish `p<i>` as fast as the server takes it; an error leaves `p<i>` in doubt
        (it may be stored) and the next publish takes a new token."""
        i = 0
        while not self.stop.is_set():
            token = f"p{i}"
            i += 1
            for checker in self.checkers.values():
                checker.attempt(token)
            try:
                event_id = channel.publish(token, replicas=replicas)
            except durables.DurablesError as exc:
                self.failures[type(exc).__name__] += 1
                time.sleep(0.02)
                continue
            for checker in self.checkers.values():
                checker.confirm(token, event_id)

    def producing(self, channel: durables.Channel, replicas: int) -> threading.Thread:
        """`produce` on a thread of its own, started."""
        thread = threading.Thread(target=self.produce, args=(channel, replicas), daemon=True)
        thread.start()
        return thread

    def receiver(self, name: str) -> Callable[[durables.Event], None]:
        checker = self.checkers.setdefault(name, Checker())
        return lambda event: checker.deliver_event(name, event)

    def drain(self, timeout: float = 60.0) -> None:
        """Until every reader has every confirmed event (or `timeout`: `report` says which
        reader lost what), then a second for late duplicates."""
        deadline = time.monotonic() + timeout
        while any(c.report().lost for c in self.checkers.values()):
            if time.monotonic() > deadline:
                return
            time.sleep(0.2)
        time.sleep(1.0)


@contextmanager
def readers(client: durables.Client, run: Run, replicated: int) -> Iterator[None]:
    """An exclusive and a serial consumer fetching in threads, a shared subscription and a
    session, all on the channel 'orders', until the block ends."""
    channel = client.channel("orders")
    shared = channel.durable("shared", kind="shared")
    sub = shared.subscribe(run.receiver("shared"), auto_ack=True, replicated=replicated)
    run.discarded["shared"] = lambda: sub.consumer.discarded
    session = client.session("roaming", timeout=120, replicated=replicated)
    session.register_interest("orders")

    class Listener:
        on_event = staticmethod(run.receiver("session"))

    session.add_listener("orders", Listener())
    session.ready_for_events()
    run.discarded["session"] = lambda: session.discarded
    loops: dict[durables.Kind, Callable[[durables.Event], None]] = {
        kind: run.receiver(kind) for kind in ("exclusive", "serial")
    }
    consumers: dict[str, durables.Consumer] = {}
    for kind in loops:
        run.discarded[kind] = lambda kind=kind: consumers[kind].discarded  # type: ignore[misc]
    try:
        with fetch_loops(channel, loops, replicated=replicated, consumers=consumers):
            yield
    finally:
        sub.close()
        assert sub.error is None and session.error is None
        session.close()


def report(run: Run, stored: Counter[str]) -> None:
    """Print a line per reader; assert what each promises."""
    assert run.checkers, "no reader"
    twice = sum(1 for n in stored.values() if n > 1)
    print(f"\nproducer failures: {dict(run.failures)}")
    for name, checker in run.checkers.items():
        r = checker.report()
        print(
            f"{name:>9}: attempted={r.attempted} confirmed={r.confirmed} "
            f"stored={len(stored)} delivered={r.delivered} lost={r.lost} "
            f"duplicated_unflagged={r.duplicated - r.duplicated_flagged} "
            f"duplicated_flagged={r.duplicated_flagged} reordered={r.reordered} "
            f"discarded={run.discarded[name]()} stored_twice={twice}"
        )
    for name, checker in run.checkers.items():
        r = checker.report()
        assert r.confirmed > 100 and r.lost == 0, checker.explain()
        assert r.duplicated == r.duplicated_flagged, checker.explain()
        assert r.unexpected == 0 and r.republished == 0, checker.explain()
        if name in ORDERED:
            assert r.reordered == 0, checker.explain()
    assert twice == 0, [t for t, n in stored.items() if n > 1][:10]


def stored_tokens(client: durables.Client) -> Counter[str]:
    raw: Any = client.redis
    entries = raw.xrange(client.channel("orders").keys.stream)
    return Counter(fields[b"d"].decode() for _, fields in entries)


def test_every_reader_rides_through_a_killed_server_a_black_hole_and_resets(
    fresh_server: RedisProcess, namespace: str
) -> None:
    """The producer and the readers each behind a fault proxy of their own: both proxies
    black-hole and reset, and the producer's also stalls (its requests land after the
    library sent them again on a new connection). A reader's stalled read landing late is
    not staged here: only the exclusive consumer is fenced against it so far."""
    run = Run()
    with ExitStack() as stack:
        near, far = (stack.enter_context(FaultProxy(fresh_server.port)) for _ in range(2))
        reading = stack.enter_context(durables.connect(near.url, namespace=namespace, **SETTINGS))
        publishing = stack.enter_context(durables.connect(far.url, namespace=namespace, **SETTINGS))
        with readers(reading, run, replicated=0):
            producer = run.producing(publishing.channel("orders"), replicas=0)
            time.sleep(1.5)
            fresh_server.kill9()  # AOF always: whatever was confirmed is on disk
            time.sleep(0.5)
            fresh_server.restart()
            time.sleep(2.0)
            for proxy in (near, far):
                proxy.blackhole()  # past the lease: every lease lapses meanwhile
            time.sleep(2.5)
            for proxy in (near, far):
                proxy.blackhole(False)
            time.sleep(2.0)
            far.stall()  # held, not dropped: publishes land late, after their retries
            time.sleep(2.5)
            far.stall(later=False)
            time.sleep(1.0)
            far.stall(False)
            time.sleep(1.5)
            for proxy in (near, far):
                proxy.reset_all()
            time.sleep(1.5)
            run.stop.set()
            producer.join(60)
            run.drain()
        with durables.connect(fresh_server.url, namespace=namespace, **FAST) as admin:
            report(run, stored_tokens(admin))


def test_an_exclusive_reader_rides_through_a_stall_whose_reads_land_late(
    fresh_server: RedisProcess, namespace: str
) -> None:
    """The exclusive consumer's read held in a stalled connection lands after it attached
    again on a new one: its gate is gone by then, so the late read takes nothing."""
    run = Run()
    with ExitStack() as stack:
        proxy = stack.enter_context(FaultProxy(fresh_server.port))
        client = stack.enter_context(durables.connect(proxy.url, namespace=namespace, **SETTINGS))
        near = stack.enter_context(
            durables.connect(fresh_server.url, namespace=namespace, **SETTINGS)
        )
        loops: dict[durables.Kind, Callable[[durables.Event], None]] = {
            "exclusive": run.receiver("exclusive")
        }
        consumers: dict[str, durables.Consumer] = {}
        run.discarded["exclusive"] = lambda: consumers["exclusive"].discarded
        with fetch_loops(client.channel("orders"), loops, consumers=consumers):
            producer = run.producing(near.channel("orders"), replicas=0)
            for _ in range(3):
                time.sleep(1.0)
                proxy.stall()
                time.sleep(2.5)
                proxy.stall(later=False)
                time.sleep(1.0)
                proxy.stall(False)
            time.sleep(1.0)
            run.stop.set()
            producer.join(60)
            run.drain()
        report(run, stored_tokens(near))


@pytest.fixture
def sentinel_set(tmp_path: Path) -> Iterator[SentinelSet]:
    with SentinelSet(server_binary(SERVER_KIND), tmp_path / "sentinel") as servers:
        yield servers


def test_every_reader_rides_through_two_failovers_with_replicated_reads(
    sentinel_set: SentinelSet, namespace: str
) -> None:
    """Publishes confirmed by a replica (`replicas=1`), reads a replica holds
    (`replicated=1`): a failover takes back neither."""
    run = Run()
    settings = {**SETTINGS, "replica_timeout_s": 2.0}
    with durables.connect(sentinel_set.url, namespace=namespace, **settings) as client:
        with readers(client, run, replicated=1):
            producer = run.producing(client.channel("orders"), replicas=1)
            for _ in range(2):
                time.sleep(1.5)
                old = sentinel_set.kill_primary()
                sentinel_set.wait_for_failover(old)
                time.sleep(1.5)
                sentinel_set.restart(old)
            time.sleep(1.5)
            run.stop.set()
            producer.join(60)
            run.drain()
        report(run, stored_tokens(client))
