"""A Redis Cluster shard losing its primary under load: three primaries with a replica
each; producers publish with `replicas=1` to a channel on the shard that is killed and
to one on another shard, while an exclusive and a shared durable on each acknowledge
as they go. The primary of the first channel's shard is killed with kill -9 and its
replica takes over. No confirmed event is lost, duplicates are flagged, order holds;
the test prints the counts and how long each channel could not publish. It runs on both
clients (the asyncio one behind the sync API, through `tests/aio_bridge.py`)."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import durables

from .checker import Checker
from .conftest import FAST, SERVER_KIND, Connect
from .ha_cluster import Cluster
from .servers import server_binary
from .test_cluster import one_channel_per_primary

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.both_clients]
SETTINGS = {**FAST, "reconnect_timeout_s": 60.0, "replicas": 1, "replica_timeout_s": 2.0}
KINDS: tuple[durables.Kind, ...] = ("exclusive", "shared")
RUN_AFTER_S = 1.5
"""How long the producers go on after the first publish confirmed past the kill."""


@pytest.fixture
def cluster_with_replicas(tmp_path: Path) -> Iterator[Cluster]:
    if SERVER_KIND != "valkey":
        pytest.skip("the cluster runs in the valkey pass only")
    with Cluster(server_binary("valkey"), tmp_path / "cluster", replicas_per_primary=1) as servers:
        yield servers


@dataclass
class Producer:
    """Publishes `<channel>-<i>` with message ids, retrying each until a replica confirmed
    it; every attempt and confirmation goes to each durable's checker."""

    channel: durables.Channel
    checkers: list[Checker]
    attempted: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    times: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def gap_after(self, moment: float, window_s: float = 30.0) -> float:
        """The longest time without a confirmed publish in the window after `moment`."""
        times = [t for t in self.times if moment - 1 <= t <= moment + window_s]
        return max((b - a for a, b in itertools.pairwise(times)), default=window_s)

    def confirmed_after(self, moment: float) -> bool:
        return bool(self.times) and self.times[-1] > moment

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            token = f"{self.channel.name}-{i}"
            self.attempted += 1
            for checker in self.checkers:
                checker.attempt(token)
            try:
                event_id = self.channel.publish(token, message_id=token)
            except durables.DurablesError as exc:  # the failover: retry the same message id
                self.failures[type(exc).__name__] += 1
                time.sleep(0.05)
                continue
            for checker in self.checkers:
                checker.confirm(token, event_id)
            self.times.append(time.monotonic())
            i += 1
            time.sleep(0.005)


class Recording:
    """A subscription listener that gives every event to its checker."""

    def __init__(self, checker: Checker, name: str) -> None:
        self.checker = checker
        self.name = name

    def __call__(self, event: durables.Event) -> None:
        self.checker.deliver_event(self.name, event)


def test_a_shard_primary_killed_under_load_loses_nothing_confirmed(
    connect: Connect, cluster_with_replicas: Cluster, namespace: str
) -> None:
    servers = cluster_with_replicas
    victim, other, _ = one_channel_per_primary(servers, "load")
    with (
        connect(servers.url, namespace=namespace, **SETTINGS) as publisher,
        connect(servers.url, namespace=namespace, **SETTINGS) as consumer,
    ):
        checkers = {(c, k): Checker() for c in (victim, other) for k in KINDS}
        subs = [
            consumer.channel(name)
            .durable(f"d-{kind}", kind=kind)
            .subscribe(Recording(checker, f"{name}/{kind}"))
            for (name, kind), checker in checkers.items()
        ]
        producers = {
            name: Producer(publisher.channel(name), [checkers[name, k] for k in KINDS])
            for name in (victim, other)
        }
        threads = [threading.Thread(target=p.run, daemon=True) for p in producers.values()]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        killed_at = time.monotonic()
        killed, promoted, failover_s = servers.kill_primary_of(f"{{{victim}}}")
        # With one replica per primary the promoted node has none until the killed one
        # comes back as its replica: `replicas=1` publishes fail (ReplicationError) till then.
        servers.restart(killed)
        rejoined_s = time.monotonic() - killed_at
        wait_until(lambda: producers[victim].confirmed_after(killed_at + rejoined_s), 60)
        time.sleep(RUN_AFTER_S)
        for producer in producers.values():
            producer.stop.set()
        for thread in threads:
            thread.join(30)
        wait_until(lambda: not any(c.report().lost for c in checkers.values()), 30, check=False)
        for sub in subs:
            sub.close()
        print(
            f"\nkilled {killed.port}, promoted {promoted.port}: failover {failover_s:.2f} s, "
            f"killed node back as a replica after {rejoined_s:.2f} s"
        )
        for name, producer in producers.items():
            print(
                f"{'killed shard' if name == victim else 'other shard '} {name}: "
                f"unavailable_s={producer.gap_after(killed_at):.2f} "
                f"failures={dict(producer.failures)}"
            )
        for (name, kind), checker in checkers.items():
            print(f"  {name}/{kind}: {checker.report()}")
        for checker in checkers.values():
            report = checker.report()
            assert report.confirmed > 0 and report.ok, checker.explain()
        assert all(sub.error is None for sub in subs)
        assert producers[other].gap_after(killed_at) < 30
        assert producers[victim].gap_after(killed_at) < 30


def wait_until(done: Callable[[], bool], timeout_s: float, *, check: bool = True) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            assert not check, f"not done within {timeout_s} s"
            return
        time.sleep(0.05)
