"""`ack_flush_interval_s` (GemFire's message-sync-interval): acknowledgements wait on the
client for the next read or for the interval, whichever comes first; 0 sends each at once."""

from __future__ import annotations

import os
import signal
import textwrap
import time
from contextlib import AbstractContextManager

import pytest

import durables

from .children import first_line, python_child
from .conftest import FAST, Connect
from .helpers import fetch_all, publish, wait_for
from .servers import RedisProcess

pytestmark = pytest.mark.both_clients

KINDS: list[durables.Kind] = ["exclusive", "shared", "serial"]


def batching(
    connect: Connect, server: RedisProcess, namespace: str, interval: float
) -> AbstractContextManager[durables.Client]:
    return connect(server.url, namespace=namespace, **FAST, ack_flush_interval_s=interval)


@pytest.mark.parametrize("kind", KINDS)
def test_acks_wait_for_the_interval_then_go_out_by_themselves(
    server: RedisProcess, namespace: str, kind: durables.Kind, connect: Connect
) -> None:
    with batching(connect, server, namespace, 0.5) as client:
        dur = client.channel("orders").durable("audit", kind=kind)
        publish(client.channel("orders"), 6)
        with dur.consumer(auto_ack=False) as c:
            assert len(fetch_all(c, 6)) == 6
            c.commit()
            sent = time.monotonic()
            assert dur.transaction_depth() == 6  # batched: nothing sent yet
            assert wait_for(lambda: dur.transaction_depth() == 0, timeout=5)
            assert time.monotonic() - sent >= 0.4  # not before the interval


@pytest.mark.parametrize("kind", KINDS)
def test_without_an_interval_every_ack_goes_out_at_once(
    server: RedisProcess, namespace: str, kind: durables.Kind, connect: Connect
) -> None:
    with batching(connect, server, namespace, 0) as client:
        dur = client.channel("orders").durable("audit", kind=kind)
        publish(client.channel("orders"), 3)
        with dur.consumer(auto_ack=False) as c:
            got = fetch_all(c, 3)
            got[0].ack()
            assert dur.transaction_depth() == 2
            c.commit()
            assert dur.transaction_depth() == 0


def test_deferred_acks_ride_with_the_next_read(
    server: RedisProcess, namespace: str, connect: Connect
) -> None:
    with batching(connect, server, namespace, 30) as client:
        channel = client.channel("orders")
        dur = channel.durable("audit", kind="shared")
        publish(channel, 2)
        with dur.consumer(auto_ack=False, prefetch=1) as c:
            (first,) = c.fetch(timeout=2)
            first.ack()
            assert dur.transaction_depth() == 1  # waiting for the interval or a read
            assert [e.text for e in c.fetch(timeout=2)] == ["e2"]  # the read carried the ack
            assert dur.transaction_depth() == 1
            c.commit()
        assert dur.transaction_depth() == 0  # the close sent the last ones


CRASHER = textwrap.dedent(
    """
    import sys, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=1.0,
                              ack_flush_interval_s=30)
    dur = client.channel("orders").durable("audit")
    c = dur.consumer("crasher", auto_ack=False)
    events = c.fetch(timeout=5)
    c.commit()
    print(len(events), flush=True)
    sys.stdin.read()
    """
)


def test_a_crash_within_the_interval_delivers_the_unsent_acks_again_flagged(
    server: RedisProcess, namespace: str, client: durables.Client, channel: durables.Channel
) -> None:
    dur = channel.durable("audit")
    publish(channel, 4)
    with python_child(CRASHER, server.url, namespace) as proc:
        assert first_line(proc) == "4"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert wait_for(lambda: _free(dur), timeout=10)
    with dur.consumer() as c:
        again = fetch_all(c, 4)
    assert [e.text for e in again] == ["e1", "e2", "e3", "e4"]
    assert all(e.redelivered for e in again)  # at least once, never silently


def _free(dur: durables.Durable) -> bool:
    try:
        dur.consumer("probe").close()
    except durables.DurableInUseError:
        return False
    return True
