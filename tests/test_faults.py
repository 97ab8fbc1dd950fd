"""Faults between client and server, through a fault proxy (killed, as Diffusion's reconnection
tests kill theirs): a killed and restarted proxy, a keep-alive that runs out, a black hole,
and a bounded soak
of many sessions under random faults. Every test counts what was published, delivered,
lost, duplicated and reordered."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

import durables

from .conftest import FAST, Connect
from .faultproxy import FaultProxy
from .helpers import fetch_loops, wait_for
from .servers import RedisProcess

pytestmark = [pytest.mark.slow, pytest.mark.both_clients]
RIDE = {**FAST, "reconnect_timeout_s": 30.0}


@dataclass
class Tally:
    """What one session received: ids in order, and which came flagged redelivered."""

    ids: list[str] = field(default_factory=list)
    flagged: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_event(self, event: durables.Event) -> None:
        with self.lock:
            if event.redelivered:
                self.flagged.add(event.id)
            self.ids.append(event.id)

    def count(self, published: list[str]) -> dict[str, int]:
        """published, delivered, lost, duplicated (and of those unflagged), reordered."""
        with self.lock:
            got = list(self.ids)
            flagged = set(self.flagged)
        seen: set[str] = set()
        duplicated = unflagged = reordered = 0
        order = {eid: i for i, eid in enumerate(published)}
        last = -1
        for eid in got:
            if eid in seen:
                duplicated += 1
                unflagged += eid not in flagged
                continue
            seen.add(eid)
            if order.get(eid, last) < last:
                reordered += 1
            last = max(last, order.get(eid, last))
        return {
            "published": len(published),
            "delivered": len(got),
            "lost": len(set(published) - seen),
            "duplicated": duplicated,
            "unflagged_duplicates": unflagged,
            "reordered": reordered,
        }


@pytest.fixture
def proxy(server: RedisProcess) -> Iterator[FaultProxy]:
    with FaultProxy(server.port) as p:
        yield p


def open_session(
    client: durables.Client, name: str, timeout: float = 60
) -> tuple[durables.Session, Tally, list[tuple[str, str]]]:
    tally, states = Tally(), []
    s = client.session(name, timeout=timeout)
    s.on_state(lambda old, new: states.append((old, new)))
    s.register_interest("orders")
    s.add_listener("orders", tally)
    s.ready_for_events()
    return s, tally, states


def test_a_session_resumes_through_a_killed_proxy_and_gets_everything_once_in_order(
    proxy: FaultProxy, server_url: str, namespace: str, connect: Connect
) -> None:
    with (
        connect(proxy.url, namespace=namespace, **RIDE) as client,
        durables.connect(server_url, namespace=namespace, **FAST) as producer,
    ):
        ch = producer.channel("orders")
        s, tally, states = open_session(client, "mobile-42")
        published = [ch.publish(f"e{i}") for i in range(50)]
        assert wait_for(lambda: len(tally.ids) >= 50)
        proxy.kill()
        published += [ch.publish(f"e{i}") for i in range(50, 150)]  # while it is away
        assert wait_for(lambda: s.state == "disconnected", 10)
        proxy.restart()
        published += [ch.publish(f"e{i}") for i in range(150, 200)]
        assert wait_for(lambda: set(published) <= set(tally.ids))
        time.sleep(0.3)
        counts = tally.count(published)
        print(counts)
        assert counts == {
            "published": 200,
            "delivered": 200,
            "lost": 0,
            "duplicated": 0,
            "unflagged_duplicates": 0,
            "reordered": 0,
        }
        assert states == [("connected", "disconnected"), ("disconnected", "connected")]
        assert s.resumed and s.id == "mobile-42"
        s.close()


def test_after_the_keep_alive_a_new_session_with_the_same_interests_is_opened(
    proxy: FaultProxy, server_url: str, namespace: str, connect: Connect
) -> None:
    with (
        connect(proxy.url, namespace=namespace, **RIDE) as client,
        durables.connect(server_url, namespace=namespace, **FAST) as producer,
    ):
        ch = producer.channel("orders")
        s, tally, states = open_session(client, "brief", timeout=1.0)
        proxy.kill()
        missed = ch.publish("while away")
        time.sleep(FAST["lease_timeout_s"] + 1.0 + 0.8)  # lease, then the keep-alive, pass
        proxy.restart()
        assert wait_for(lambda: s.state == "expired", 15)
        assert states == [("connected", "disconnected"), ("disconnected", "expired")]
        assert s.resumed is False and "orders" in s.interests
        later = ch.publish("after")
        assert wait_for(lambda: later in tally.ids)
        assert missed not in tally.ids  # a new session: nothing old replayed
        s.close()


def test_a_black_hole_is_noticed_within_the_heartbeat_bound(
    proxy: FaultProxy, namespace: str, connect: Connect
) -> None:
    """Bound: a heartbeat beat (lease / 3) plus its socket timeout (lease / 4), well under
    the 30 s socket timeout; with the tests' 1 s lease, about 0.6 s."""
    with connect(proxy.url, namespace=namespace, **RIDE) as client:
        dur = client.channel("orders").durable("workers", kind="shared")
        got: list[str] = []
        sub = dur.subscribe(lambda event: got.append(event.id))
        time.sleep(0.5)
        noticed = threading.Event()
        client.on_state(lambda old, new: noticed.set() if new == "reconnecting" else None)
        started = time.monotonic()
        proxy.blackhole()
        assert noticed.wait(10)
        took = time.monotonic() - started
        print(f"black hole noticed after {took:.2f} s")
        assert took < FAST["lease_timeout_s"] * (1 / 3 + 1 / 4) + 1.0
        proxy.blackhole(False)
        assert wait_for(lambda: client.state == "connected", 15)
        eid = client.channel("orders").publish("after")
        assert wait_for(lambda: eid in got)
        assert sub.error is None
        sub.close()


def _consume(
    consumers: dict[str, durables.Consumer], stop: threading.Event
) -> tuple[Tally, dict[str, float], dict[str, list[str]], list[threading.Thread]]:
    """Each consumer fetching (auto-ack) in a thread of its own: one tally of all they got,
    and when each event first reached a consumer whose name starts with 'near' (the others'
    events under their own name)."""
    tally, near_at, others = Tally(), dict[str, float](), dict[str, list[str]]()

    def loop(name: str, consumer: durables.Consumer) -> None:
        while not stop.is_set():
            try:
                events = consumer.fetch(timeout=0.3)
            except durables.ConnectionLostError:
                continue  # the black-holed one, while it reconnects
            for event in events:
                tally.on_event(event)
                if name.startswith("near"):
                    near_at.setdefault(event.id, time.monotonic())
                else:
                    others.setdefault(name, []).append(event.id)

    threads = [threading.Thread(target=loop, args=pair) for pair in consumers.items()]
    for thread in threads:
        thread.start()
    return tally, near_at, others, threads


def test_a_shared_consumer_black_holed_while_it_watches_loses_nothing_and_holds_no_one_up(
    proxy: FaultProxy, server_url: str, namespace: str, connect: Connect
) -> None:
    """The first idle consumer in the ring watches the channel for the others. Behind a
    black hole its reads still run on the server, which sees nothing wrong: an event its
    read takes is dealt to it and the reply is lost. The others go on receiving, and what
    was dealt to it comes back (flagged) once its lease lapses or it returns."""
    with (
        connect(proxy.url, namespace=namespace, **RIDE) as far_client,
        durables.connect(server_url, namespace=namespace, **FAST) as near_client,
    ):
        ch = near_client.channel("orders")
        durable = "work"
        waits = ch.ctx.executor.redis
        stop = threading.Event()
        with (
            far_client.channel("orders")
            .durable(durable, kind="shared")
            .consumer("far", prefetch=5, auto_ack=True) as far
        ):
            near_dur = ch.durable(durable, kind="shared")
            with (
                near_dur.consumer("near-1", prefetch=5, auto_ack=True) as n1,
                near_dur.consumer("near-2", prefetch=5, auto_ack=True) as n2,
            ):
                tally, near_at, others, threads = _consume(
                    {"far": far, "near-1": n1, "near-2": n2}, stop
                )
                try:
                    key = f"{namespace}:{{orders}}:waits:{durable}"
                    far_id = cast(Any, far.reader).id

                    def far_watches() -> bool:  # its mark is an id, not the doorbell's 'd'
                        return waits.hget(key, far_id) not in (None, b"d", "d")

                    assert wait_for(far_watches, 10)
                    proxy.blackhole()
                    sent: dict[str, float] = {}
                    for i in range(30):  # 1.5 s in the dark: the far one's lease lapses
                        sent[ch.publish(f"dark-{i}")] = time.monotonic()
                        time.sleep(0.05)
                    dark = list(sent)
                    reached_near = [eid for eid in dark if eid in near_at]
                    proxy.blackhole(False)
                    assert wait_for(lambda: far_client.state == "connected", 15)
                    light: list[str] = []
                    while len(light) < 100 and not set(others.get("far", [])) & set(light):
                        light.append(ch.publish(f"light-{len(light)}"))  # till it takes a turn
                        time.sleep(0.02)
                    published = dark + light
                    assert wait_for(lambda: set(published) <= set(tally.ids), 15)
                    time.sleep(0.3)
                finally:
                    stop.set()
                    for thread in threads:
                        thread.join(5)
        counts = tally.count(published)
        waits_s = sorted(near_at[eid] - sent[eid] for eid in reached_near)
        print(
            f"{counts}; in the dark {len(reached_near)}/{len(dark)} reached the near ones, "
            f"p50 {waits_s[len(waits_s) // 2] * 1000:.0f} ms, max {waits_s[-1] * 1000:.0f} ms"
        )
        assert counts["lost"] == 0 and counts["unflagged_duplicates"] == 0
        assert len(reached_near) >= len(dark) // 2  # the near ones went on in the dark
        assert waits_s[len(waits_s) // 2] < 0.3
        assert set(others.get("far", [])) & set(light)  # back in the ring once it returned


def test_every_reader_and_a_producer_are_back_soon_after_a_black_hole_ends(
    proxy: FaultProxy, server_url: str, namespace: str, connect: Connect
) -> None:
    """Behind one black-holed proxy for 2 s: an exclusive and a serial consumer fetching,
    a shared subscription, a session and a producer. Each is back within a few seconds of
    the hole's end (a socket opened into the hole used to hold its caller for the whole
    socket timeout), and the counts hold: nothing lost, duplicates only flagged, order
    kept where promised, and the producer's retried publishes stored once."""
    with (
        connect(proxy.url, namespace=namespace, **RIDE) as client,
        durables.connect(server_url, namespace=namespace, **FAST) as near,
    ):
        ch = client.channel("orders")
        tallies = {name: Tally() for name in ("exclusive", "serial", "shared", "session")}
        sub = ch.durable("shared", kind="shared").subscribe(tallies["shared"].on_event)
        session = client.session("roaming", timeout=60)
        session.register_interest("orders")
        session.add_listener("orders", tallies["session"])
        session.ready_for_events()
        kinds: tuple[durables.Kind, ...] = ("exclusive", "serial")
        loops = {kind: tallies[kind].on_event for kind in kinds}
        try:
            with fetch_loops(ch, loops):
                near_ch = near.channel("orders")
                published = [near_ch.publish(f"before-{i}") for i in range(20)]
                assert wait_for(lambda: all(set(published) <= set(t.ids) for t in tallies.values()))
                proxy.blackhole()
                far_ids: list[str] = []
                producer = threading.Thread(  # its publishes wait the hole out
                    target=lambda: far_ids.extend(
                        ch.publish(f"far-{i}", message_id=f"far-{i}") for i in range(5)
                    ),
                    daemon=True,
                )
                producer.start()
                for i in range(20):
                    published.append(near_ch.publish(f"dark-{i}"))
                    time.sleep(0.1)
                proxy.blackhole(False)
                ended = time.monotonic()
                producer.join(15)
                assert len(far_ids) == 5
                late = near_ch.publish("after")
                published += [*far_ids, late]
                assert wait_for(lambda: all(late in t.ids for t in tallies.values()), 15)
                back = time.monotonic() - ended
                assert wait_for(lambda: all(set(published) <= set(t.ids) for t in tallies.values()))
                time.sleep(0.3)
        finally:
            sub.close()
            session.close()
        print(f"every reader had the event published after the hole {back:.2f} s after it")
        assert back < 5  # not the socket timeout (30 s)
        raw: Any = near.redis
        stored = [fields[b"d"] for _, fields in raw.xrange(near.keys("orders").stream)]
        assert sorted(d for d in stored if d.startswith(b"far-")) == [
            b"far-%d" % i for i in range(5)
        ]
        for name, tally in tallies.items():
            counts = tally.count(published)
            print(f"{name}: {counts}")
            assert counts["lost"] == 0 and counts["unflagged_duplicates"] == 0
            if name != "shared":
                assert counts["reordered"] == 0


class Chaos:
    """Random faults on the proxies from a thread: kill and restart, reset, slow down."""

    def __init__(self, proxies: list[FaultProxy], rng: random.Random) -> None:
        self.proxies, self.rng = proxies, rng
        self.done: dict[str, int] = {"kill": 0, "reset": 0, "delay": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = self.rng
        while not self._stop.wait(rng.uniform(0.2, 0.6)):
            p = rng.choice(self.proxies)
            fault = rng.choice(("kill", "reset", "delay"))
            self.done[fault] += 1
            if fault == "kill":
                p.kill()
                time.sleep(rng.uniform(0.1, 1.5))
                p.restart()
            elif fault == "reset":
                p.reset_all()
            else:
                p.latency(rng.uniform(0.01, 0.1))
                time.sleep(0.5)
                p.latency(0)

    def __enter__(self) -> Chaos:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


SESSIONS = 10
EVENTS = 10_000
SOAK_S = 40.0


def test_soak_ten_sessions_through_proxies_under_random_faults(
    server: RedisProcess, server_url: str, namespace: str
) -> None:
    """Ten clients, each through its own proxy, while a producer publishes 10,000 events
    (half ack-required) and the proxies are killed, reset and slowed at random."""
    rng = random.Random(20261123)
    proxies = [FaultProxy(server.port) for _ in range(SESSIONS)]
    clients = [durables.connect(p.url, namespace=namespace, **RIDE) for p in proxies]
    try:
        with durables.connect(server_url, namespace=namespace, **FAST) as producer:
            ch = producer.channel("orders")
            sessions = [open_session(c, f"soak-{i}", timeout=60) for i, c in enumerate(clients)]
            published: list[str] = []
            with Chaos(proxies, rng) as chaos:
                started = time.monotonic()
                for start in range(0, EVENTS, 100):
                    for i in range(start, start + 100):
                        published.append(
                            ch.publish(f"e{i}", ack_required=i % 2 == 0, ack_timeout=120)
                        )
                    time.sleep(0.01)
                # a fast machine publishes before much has gone wrong: keep the faults
                # coming until there were 20 (bounded), while the sessions catch up
                assert wait_for(lambda: sum(chaos.done.values()) >= 20, SOAK_S)
            everyone = [tally for _, tally, _ in sessions]
            assert wait_for(lambda: all(set(published) <= set(t.ids) for t in everyone), SOAK_S)
            print(
                f"published {len(published)} in {time.monotonic() - started:.1f} s; "
                f"faults: {chaos.done}"
            )
            assert sum(chaos.done.values()) >= 20
            for i, tally in enumerate(everyone):
                counts = tally.count(published)
                print(f"soak-{i}: {counts}")
                assert counts["lost"] == 0
                assert counts["unflagged_duplicates"] == 0
                assert counts["reordered"] == 0
            assert ch.nacks() == []
            for s, _, _ in sessions:
                s.close()
    finally:
        for c in clients:
            c.close()
        for p in proxies:
            p.close()
