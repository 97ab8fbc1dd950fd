"""High availability through Sentinel: the primary killed with kill -9, again and again,
while a producer publishes with `replicas=1` and consumers acknowledge. Every confirmed
publish survives, duplicates are discarded and counted, consumers go on by themselves;
the test prints the unavailable seconds of each failover."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import durables

from .conftest import FAST, SERVER_KIND
from .ha_servers import SentinelSet
from .servers import server_binary

pytestmark = pytest.mark.slow
FAILOVERS = 2
SETTINGS = {**FAST, "reconnect_timeout_s": 60.0, "replicas": 1, "replica_timeout_s": 2.0}


@pytest.fixture
def sentinel_set(tmp_path: Path) -> Iterator[SentinelSet]:
    with SentinelSet(server_binary(SERVER_KIND), tmp_path / "sentinel") as servers:
        yield servers


@dataclass
class Producer:
    """Publishes `m<i>` with message ids, retrying each until a replica confirmed it."""

    channel: durables.Channel
    attempted: int = 0
    confirmed: list[str] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    last_ok: float = 0.0
    times: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def gap_after(self, moment: float, window_s: float = 30.0) -> float:
        """The longest time without a confirmed publish in the window after `moment`."""
        times = [t for t in self.times if moment - 1 <= t <= moment + window_s]
        return max((b - a for a, b in itertools.pairwise(times)), default=window_s)

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            payload = f"m{i}"
            self.attempted += 1
            try:
                self.channel.publish(payload, message_id=payload)
            except durables.DurablesError as exc:  # a failover: retry the same message id
                self.failures[type(exc).__name__] += 1
                time.sleep(0.05)
                continue
            self.confirmed.append(payload)
            self.last_ok = time.monotonic()
            self.times.append(self.last_ok)
            i += 1
            time.sleep(0.005)


@dataclass
class Received:
    texts: list[str] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, event: durables.Event) -> None:
        with self.lock:
            self.texts.append(event.text)
            if event.redelivered:
                self.flagged.append(event.text)


def test_kill_the_primary_repeatedly_nothing_confirmed_is_lost(
    sentinel_set: SentinelSet, namespace: str
) -> None:
    with (
        durables.connect(sentinel_set.url, namespace=namespace, **SETTINGS) as client,
        durables.connect(sentinel_set.url, namespace=namespace, **SETTINGS) as consumer,
    ):
        ch = client.channel("orders")
        received = Received()
        sub = consumer.channel("orders").durable("billing", kind="shared").subscribe(received)
        producer = Producer(ch)
        thread = threading.Thread(target=producer.run, daemon=True)
        thread.start()
        kills: list[float] = []
        for _ in range(FAILOVERS):
            time.sleep(1.0)
            killed_at = time.monotonic()
            old = sentinel_set.kill_primary()
            sentinel_set.wait_for_failover(old)
            deadline = time.monotonic() + 60
            while producer.last_ok < killed_at and time.monotonic() < deadline:
                time.sleep(0.05)
            kills.append(killed_at)
            sentinel_set.restart(old)
        time.sleep(1.0)
        producer.stop.set()
        thread.join(30)
        confirmed = set(producer.confirmed)
        deadline = time.monotonic() + 30
        while not confirmed <= set(received.texts) and time.monotonic() < deadline:
            time.sleep(0.1)
        sub.close()
        unavailable = [producer.gap_after(k) for k in kills]
        counts = Counter(received.texts)
        duplicated = sum(n - 1 for n in counts.values())
        lost = confirmed - set(counts)
        print(
            f"attempted={producer.attempted} confirmed={len(confirmed)} "
            f"delivered={len(received.texts)} lost={len(lost)} duplicated={duplicated} "
            f"discarded={sub.consumer.discarded} failures={dict(producer.failures)} "
            f"unavailable_s={[round(u, 2) for u in unavailable]}"
        )
        assert not lost, sorted(lost)[:10]
        assert len(confirmed) == len(producer.confirmed)  # message ids stored once each
        assert sub.error is None
        assert all(u < 30 for u in unavailable)
