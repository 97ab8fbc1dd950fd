"""Idle keyed consumers: one watches the channel for the others, who wait for their own
bell; an event wakes the watcher, whose fetch deals it to its key's owner and rings that
owner's bell alone. What a watcher that stops asking or dies costs the others."""

from __future__ import annotations

import os
import signal
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from redis import Redis

import durables

from .children import first_line, python_child
from .conftest import FAST, Connect
from .helpers import command_calls, fetching

pytestmark = pytest.mark.both_clients

Got = list[tuple[str, str, float]]
"""What arrived: (consumer, text, when)."""


@contextmanager
def _waiting(channel: durables.Channel, names: str, timeout: float) -> Iterator[Got]:
    """Consumers of a keyed durable, one per letter of `names`, each fetching in a thread
    of its own and idle by the time this yields what arrives."""
    dur = channel.durable("work", kind="keyed")
    consumers = {name: dur.consumer(name, prefetch=5, auto_ack=True) for name in names}
    try:
        got, halt = fetching(consumers, timeout)
        try:
            time.sleep(0.6)  # all waiting
            yield got
        finally:
            halt()
    finally:
        for consumer in consumers.values():
            consumer.close()


def _one_at_a_time(channel: durables.Channel, got: Got, count: int) -> None:
    """Publish k1..k<count>, each of its own key, once the one before has arrived."""
    for i in range(1, count + 1):
        channel.publish(f"k{i}", key=f"k{i}")
        deadline = time.monotonic() + 5
        while len(got) < i and time.monotonic() < deadline:
            time.sleep(0.002)


def test_an_event_published_to_idle_keyed_consumers_wakes_the_watcher_and_the_owner(
    connect: Connect, server_url: str, namespace: str
) -> None:
    """Five idle consumers: an event costs its publish, the watcher's fetch and its owner's
    (when that is another), not a fetch by every consumer (each woken by the channel, which
    cost six scripts per event and more with each consumer)."""
    # leases and waits long enough that no renewal and no wait's end is counted
    settings = {**FAST, "lease_timeout_s": 30.0, "block_s": 5.0}
    with connect(server_url, namespace=namespace, **settings) as client:
        channel = client.channel("orders")
        redis = channel.ctx.executor.redis
        if not isinstance(redis, Redis):
            pytest.skip("the server's command counts are per node on a cluster")
        with _waiting(channel, "abcde", timeout=4.0) as got:
            before = command_calls(redis, "evalsha")
            _one_at_a_time(channel, got, 24)
            scripts = command_calls(redis, "evalsha") - before
        channel.delete()  # the members' own bells included
        assert redis.keys(f"{namespace}:{{orders}}:*") == []
    assert sorted(text for _, text, _ in got) == sorted(f"k{i}" for i in range(1, 25))
    assert len({name for name, _, _ in got}) >= 3  # the keys went to their owners
    print(f"scripts per event: {scripts / 24:.2f}")
    assert scripts / 24 < 4.5


def test_a_watcher_that_stops_asking_hands_the_watch_on(channel: durables.Channel) -> None:
    """The first consumer to wait watches, then stops asking: it hands the watch to the
    other, blocked in a long wait for its own bell, which deals its keys' events at once."""
    dur = channel.durable("work", kind="keyed")
    with (
        dur.consumer("a", prefetch=5, auto_ack=True) as a,
        dur.consumer("b", prefetch=5, auto_ack=True) as b,
    ):
        assert a.fetch(timeout=0.3) == []  # it watched, and stops asking
        got, halt = fetching({"b": b}, timeout=4.0)
        try:
            time.sleep(0.5)  # b waits for its bell (or watches, once a handed it on)
            sent = time.monotonic()
            for i in range(20):
                channel.publish(f"k{i}", key=f"k{i}")
            deadline = sent + 5
            while not got and time.monotonic() < deadline:
                time.sleep(0.005)
        finally:
            halt()
        assert got and got[0][2] - sent < 1.0  # not after b's wait ran out
        rest = {text for _, text, _ in got}  # then what is left: a's keys waited for a
        for consumer in (a, b):
            while batch := consumer.fetch(timeout=1):
                rest.update(e.text for e in batch)
        assert rest == {f"k{i}" for i in range(20)}


WATCHER = textwrap.dedent(
    """
    import sys, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=60.0)
    dur = client.channel("orders").durable("work", kind="keyed")
    c = dur.consumer("doomed", prefetch=5, auto_ack=True)
    print("attached", flush=True)
    while True:
        c.fetch(timeout=5)
    """
)


def test_a_keyed_watcher_killed_while_it_watches_holds_the_others_up_no_longer_than_a_wait(
    server_url: str, namespace: str, channel: durables.Channel
) -> None:
    """The first idle consumer watches; killed, its watch lasts until its term ends, but
    the other's waits still end in a fetch, which deals its keys' events."""
    dur = channel.durable("work", kind="keyed")
    with python_child(WATCHER, server_url, namespace) as proc:
        assert first_line(proc) == "attached"
        time.sleep(0.5)  # it waits first: it watches
        with dur.consumer("survivor", prefetch=5, auto_ack=True) as survivor:
            got, halt = fetching({"survivor": survivor}, timeout=0.3)
            try:
                time.sleep(0.5)
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                sent = time.monotonic()
                for i in range(20):
                    channel.publish(f"k{i}", key=f"k{i}")
                while not got and time.monotonic() < sent + 10:
                    time.sleep(0.005)
            finally:
                halt()
    assert got and got[0][2] - sent < 0.8  # within a wait (0.3 s), not the dead one's term


def test_deleting_a_keyed_durable_takes_its_members_bells(channel: durables.Channel) -> None:
    """Members rung while they waited have a bell each; deleting the durable while they
    are attached takes the bells with it (else they would lapse a minute later)."""
    redis = channel.ctx.executor.redis
    if not isinstance(redis, Redis):
        pytest.skip("a look at the keys needs one node")
    bells = f"{channel.ctx.namespace}:{{{channel.name}}}:door:*"
    dur = channel.durable("work", kind="keyed")
    with (
        dur.consumer("a", prefetch=5, auto_ack=True) as a,
        dur.consumer("b", prefetch=5, auto_ack=True) as b,
    ):
        got, halt = fetching({"a": a, "b": b}, timeout=0.5)
        try:
            time.sleep(0.6)  # both waiting, one watching
            for i in range(10):
                channel.publish(f"k{i}", key=f"k{i}")
            deadline = time.monotonic() + 5
            while len(got) < 10 and time.monotonic() < deadline:
                time.sleep(0.005)
        finally:
            halt()
        assert len(got) == 10 and redis.keys(bells)  # the one not watching was rung
        dur.delete()
        assert redis.keys(bells) == []


def test_an_event_dealt_again_to_a_waiting_keyed_consumer_comes_flagged(
    channel: durables.Channel,
) -> None:
    """A waiting consumer rung by another's fetch reads its pending list behind its wait,
    without the dispatcher; events dealt again (rolled back here) still come flagged, with
    their delivery count: the read carries no counts, so such events come by a fetch."""
    dur = channel.durable("work", kind="keyed")
    with (
        dur.consumer("a", prefetch=20, auto_ack=True) as a,
        dur.consumer("b", prefetch=20) as b,
    ):
        for i in range(10):
            channel.publish(f"k{i}", key=f"k{i}")
        mine = b.fetch(timeout=1)
        assert mine  # b's keys (a's wait for a)
        came: list[durables.Event] = []
        stop = threading.Event()

        def again() -> None:  # b waits for its bell while a watches
            while not stop.is_set():
                for event in b.fetch(timeout=4.0):
                    came.append(event)
                    event.ack()

        _, halt = fetching({"a": a}, timeout=4.0)  # a waits first: it watches
        try:
            time.sleep(0.5)
            waiter = threading.Thread(target=again)
            waiter.start()
            try:
                time.sleep(0.5)
                for event in mine:
                    event.rollback()  # the bell rings: a's fetch deals them to b again
                deadline = time.monotonic() + 5
                while len(came) < len(mine) and time.monotonic() < deadline:
                    time.sleep(0.005)
            finally:
                stop.set()
                waiter.join(10)
        finally:
            halt()
    assert [e.text for e in came] == [e.text for e in mine]
    assert all(e.redelivered for e in came), [(e.text, e.redelivered) for e in came]
