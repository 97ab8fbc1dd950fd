"""`replicated=N` reads: a consumer or subscription hands out only events that N replicas
hold (a `WAIT` in the read's round trip), so a failover cannot take back what it delivered.
With the replicas stopped, events are held back, not lost; they come once the replicas
confirm them."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import durables

from .conftest import FAST, SERVER_KIND, Connect
from .ha_sentinel import SentinelSet
from .helpers import wait_for
from .servers import server_binary

pytestmark = [pytest.mark.slow, pytest.mark.both_clients]


@pytest.fixture(scope="module")
def sentinel_set(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelSet]:
    workdir: Path = tmp_path_factory.mktemp("replicated")
    with SentinelSet(server_binary(SERVER_KIND), workdir) as servers:
        yield servers


@pytest.fixture
def paused_replicas(sentinel_set: SentinelSet) -> Iterator[list[int]]:
    """The replicas' pids, to stop (SIGSTOP) in a test; always resumed after it."""
    pids = [replica.pid for replica in sentinel_set.replicas()]
    try:
        yield pids
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        sentinel_set.wait_replicas_in_sync()


@pytest.mark.parametrize("kind", ["exclusive", "shared", "serial", "keyed"])
@pytest.mark.parametrize("blocked", [False, True], ids=["published_before", "answers_the_read"])
def test_a_replicated_read_holds_back_events_no_replica_has_yet(
    sentinel_set: SentinelSet,
    paused_replicas: list[int],
    namespace: str,
    connect: Connect,
    kind: durables.Kind,
    blocked: bool,
) -> None:
    """With the replicas stopped, an event read is held back, not lost, whether it was
    published before the fetch or answers the fetch's blocked read. `WAIT` counts the last
    write its connection made, and a blocked read answered by a publish is not one (the
    server replicates its effect in the publisher's name): a write of the reader's own must
    come before the `WAIT`."""
    settings = {**FAST, "replica_timeout_s": 0.2}
    with connect(sentinel_set.primary().url, namespace=namespace, **settings) as client:
        ch = client.channel("orders")
        dur = ch.durable("audit", kind=kind)
        with dur.consumer("c", replicated=1) as c:
            ch.publish("a")
            (a,) = c.fetch(timeout=2)
            assert a.text == "a"  # replicas up: at once
            a.ack()  # now: no write of this consumer after the replicas stop
            assert c.fetch(timeout=0.3) == []
            for pid in paused_replicas:
                os.kill(pid, signal.SIGSTOP)
            publisher = threading.Timer(0.3 if blocked else 0, ch.publish, ["b"])
            publisher.start()
            if not blocked:
                publisher.join(10)
            started = time.monotonic()
            try:
                assert c.fetch(timeout=1.0) == []  # read, but no replica confirmed it
            finally:
                publisher.join(10)
            assert time.monotonic() - started < 3
            for pid in paused_replicas:
                os.kill(pid, signal.SIGCONT)
            got: list[str] = []
            deadline = time.monotonic() + 10
            while not got and time.monotonic() < deadline:
                got += [e.text for e in c.fetch(timeout=0.5)]
            assert got == ["b"]


def test_a_replicated_subscription_gets_every_event(
    sentinel_set: SentinelSet, namespace: str, connect: Connect
) -> None:
    with connect(sentinel_set.primary().url, namespace=namespace, **FAST) as client:
        ch = client.channel("orders")
        got: list[str] = []
        sub = ch.durable("audit").subscribe(lambda e: got.append(e.text), replicated=2)
        try:
            for i in range(20):
                ch.publish(f"e{i}")
            assert wait_for(lambda: len(got) == 20, 10)
            assert got == [f"e{i}" for i in range(20)] and sub.error is None
        finally:
            sub.close()


def test_replicated_must_be_a_small_count(
    sentinel_set: SentinelSet, namespace: str, connect: Connect
) -> None:
    with connect(sentinel_set.primary().url, namespace=namespace, **FAST) as client:
        dur = client.channel("orders").durable("audit")
        for bad in (-1, 17, True, "1"):
            with pytest.raises(durables.ConfigError, match="replicated"):
                dur.consumer(replicated=bad)  # type: ignore[arg-type]


class Keep:
    def __init__(self) -> None:
        self.got: list[str] = []

    def on_event(self, event: durables.Event) -> None:
        self.got.append(event.text)


@pytest.mark.parametrize("blocked", [False, True], ids=["published_before", "answers_the_read"])
def test_a_replicated_session_delivers_only_what_a_replica_holds(
    sentinel_set: SentinelSet,
    paused_replicas: list[int],
    namespace: str,
    connect: Connect,
    blocked: bool,
) -> None:
    """Whether the event came before the delivery's read or answered it while it blocked
    (then the server replicates the read's effect in the publisher's name, and `WAIT`
    would not count it), it waits for a replica."""
    settings = {**FAST, "replica_timeout_s": 0.2}
    with connect(sentinel_set.primary().url, namespace=namespace, **settings) as client:
        ch = client.channel("orders")
        s = client.session("phone", timeout=30, replicated=1)
        s.register_interest("orders")
        s.add_listener("orders", keep := Keep())
        s.ready_for_events()
        ch.publish("a")
        assert wait_for(lambda: keep.got == ["a"], 10)
        if blocked:
            time.sleep(0.5)  # the delivery blocks in its read by now
        for pid in paused_replicas:
            os.kill(pid, signal.SIGSTOP)
        ch.publish("b")
        time.sleep(1.0)
        assert keep.got == ["a"]  # read, but no replica confirmed it yet
        for pid in paused_replicas:
            os.kill(pid, signal.SIGCONT)
        assert wait_for(lambda: keep.got == ["a", "b"], 10)
        s.close()
        with pytest.raises(durables.ConfigError, match="replicated"):
            client.session("other", replicated=-1)
