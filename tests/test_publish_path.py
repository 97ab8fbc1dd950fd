"""A publish names the keys of the channel's session trip points only while the server
asks for them: a client that has published to a channel with no queue limits sends the
stream and the meta hash alone. A limit set after that (by any client) must hold all the
same, and nothing may be stored twice or lost on the way."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import durables

from .conftest import FAST
from .test_queue_limits import closes

pytestmark = pytest.mark.both_clients  # the publisher: the session's client is a sync one


class Held:
    """A session listener that keeps the first event in its hands (in flight)."""

    def __init__(self) -> None:
        self.arrived = threading.Semaphore(0)
        self.release = threading.Event()

    def on_event(self, event: durables.Event) -> None:
        self.arrived.release()
        self.release.wait(timeout=10)


def test_a_limit_set_by_another_client_holds_for_a_publisher_that_named_no_trip_points(
    client: durables.Client, server_url: str, namespace: str
) -> None:
    ch = client.channel("orders")
    for i in range(3):
        ch.publish(f"before {i}")  # no session has a limit: the publisher names no trip points
    with durables.connect(server_url, namespace=namespace, **FAST) as other:  # the session's
        s = other.session("phone", timeout=60, max_depth=2, disconnected_max_depth=50)
        s.register_interest("orders")
        held = Held()
        s.add_listener("orders", held)
        s.ready_for_events()
        ids = [ch.publish("e1")]
        assert held.arrived.acquire(timeout=10)  # 1 in flight
        ids.append(ch.publish("e2"))
        assert s.info().depth == 2 and s.info().queue_limit == 2
        ids.append(ch.publish("e3"))  # beyond max_depth: the session's overflow closes it
        held.release.set()
        assert closes(s)
        s.close()
    assert len(set(ids)) == 3
    raw: Any = client.redis
    stored = [fields[b"d"] for _, fields in raw.xrange(ch.keys.stream)]
    assert stored == [b"before 0", b"before 1", b"before 2", b"e1", b"e2", b"e3"]  # each once


def _refused(client: durables.Client) -> int:
    """How many calls the server refused with TRIPS (its error statistics)."""
    stats: Any = client.redis.info("errorstats")
    return int(stats.get("errorstat_TRIPS", {}).get("count", 0))


def test_a_publisher_asked_for_the_trip_points_names_them_for_a_while_not_every_time(
    client: durables.Client, server_url: str, namespace: str
) -> None:
    ch = client.channel("orders")
    with durables.connect(server_url, namespace=namespace, **FAST) as other:
        s = other.session("phone", timeout=60, max_depth=1000)
        s.register_interest("orders")
        s.ready_for_events()
        before = _refused(client)
        for i in range(130):
            ch.publish(f"e{i}")
        refused = _refused(client) - before
        s.close()
    assert 1 <= refused <= 3  # once, then again after each 64 publishes that named them
    raw: Any = client.redis
    assert raw.xlen(ch.keys.stream) == 130  # a refused call stored nothing
