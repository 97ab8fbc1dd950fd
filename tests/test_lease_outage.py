"""The README's loops through a black hole longer than the lease: no exception reaches the
application, every event arrives, and those that come again are flagged. An ack() whose
lease lapsed in the outage returns (counted in `consumer.lost_acks`); the consumer attaches
again at its next fetch. A read whose reply a shorter outage lost is read again first."""

from __future__ import annotations

import threading
import time

import pytest

import durables

from .conftest import FAST, Connect
from .faultproxy import FaultProxy
from .helpers import wait_for
from .servers import RedisProcess

pytestmark = [pytest.mark.slow, pytest.mark.both_clients]
RIDE = {**FAST, "reconnect_timeout_s": 30.0}
HOLE_S = 3.0  # three leases


def test_the_readme_loops_ride_through_a_black_hole_longer_than_the_lease(
    server: RedisProcess, server_url: str, namespace: str, connect: Connect
) -> None:
    with (
        FaultProxy(server.port) as proxy,
        connect(proxy.url, namespace=namespace, **RIDE) as client,
        durables.connect(server_url, namespace=namespace, **FAST) as near,
    ):
        orders = client.channel("orders")
        billing = orders.durable("billing", kind="exclusive")
        listened: list[durables.Event] = []
        audit = orders.durable("audit", kind="exclusive")
        sub = audit.subscribe(listened.append)  # the README's subscription
        near_orders = near.channel("orders")
        published = [near_orders.publish(f"e{i}") for i in range(5)]
        got: list[durables.Event] = []
        with billing.consumer(auto_ack=False) as consumer:
            held = consumer.fetch(timeout=5.0)
            assert [e.text for e in held] == [f"e{i}" for i in range(5)]
            proxy.blackhole()
            for i in range(5):
                published.append(near_orders.publish(f"dark{i}"))
                time.sleep(HOLE_S / 5)
            proxy.blackhole(False)
            for event in held:  # as the README's loop acknowledges what it fetched
                got.append(event)
                event.ack()
            assert consumer.lost_acks >= 1  # the lease had lapsed: reported, not raised
            published.append(near_orders.publish("after"))
            deadline = time.monotonic() + 30
            while len({e.text for e in got}) < len(published) and time.monotonic() < deadline:
                for event in consumer.fetch(timeout=1.0):  # the README's loop, unchanged
                    got.append(event)
                    event.ack()
        assert wait_for(lambda: len({e.text for e in listened}) == len(published), 30)
        assert sub.error is None
        sub.close()
        wanted = [f"e{i}" for i in range(5)] + [f"dark{i}" for i in range(5)] + ["after"]
        for received in (got, listened):
            texts = [e.text for e in received]
            first = list(dict.fromkeys(texts))
            assert first == wanted  # nothing lost, in order
            seen: set[str] = set()
            for event in received:
                assert event.text not in seen or event.redelivered, event  # repeats flagged
                seen.add(event.text)
        assert billing.transaction_depth() == 0 and billing.depth() == 0
        assert wait_for(lambda: audit.transaction_depth() == 0, 10)


def test_an_ack_refused_for_a_lapsed_lease_goes_again_after_the_next_attach(
    server: RedisProcess, server_url: str, namespace: str, connect: Connect
) -> None:
    """Nobody took the durable meanwhile: the consumer takes its lease back at its next
    fetch, and the acknowledgement the server refused goes with that read."""
    with (
        FaultProxy(server.port) as proxy,
        connect(proxy.url, namespace=namespace, **RIDE) as client,
        durables.connect(server_url, namespace=namespace, **FAST) as near,
    ):
        dur = client.channel("orders").durable("billing")
        ids = [near.channel("orders").publish(f"e{i}") for i in range(3)]
        with dur.consumer(auto_ack=False) as consumer:
            events = consumer.fetch(timeout=5.0)
            assert [e.id for e in events] == ids
            proxy.blackhole()
            time.sleep(HOLE_S)
            proxy.blackhole(False)
            events[-1].ack()
            assert consumer.lost_acks == 1
            assert consumer.fetch(timeout=1.0) == []  # attached again; nothing comes back
            assert wait_for(lambda: dur.transaction_depth() == 0, 10)


@pytest.mark.parametrize("kind", ["exclusive", "shared"])
def test_closing_a_consumer_while_the_server_is_away_does_not_fail_and_its_lease_lapses(
    server: RedisProcess, server_url: str, namespace: str, connect: Connect, kind: durables.Kind
) -> None:
    """Giving up a lease is one try: with the server unreachable (or a slot moving past the
    retries) `close()` returns, says so in the log, and the lease lapses by itself: the
    events the closed consumer held come to the next one, flagged."""
    with (
        FaultProxy(server.port) as proxy,
        connect(proxy.url, namespace=namespace, **{**FAST, "reconnect_timeout_s": 2.0}) as away,
        durables.connect(server_url, namespace=namespace, **FAST) as near,
    ):
        published = [near.channel("orders").publish(f"e{i}") for i in range(3)]
        durable = away.channel("orders").durable("billing", kind=kind)
        consumer = durable.consumer(auto_ack=False)
        held = consumer.fetch(timeout=5.0)
        assert [e.id for e in held] == published
        proxy.kill()
        started = time.monotonic()
        consumer.close()  # no exception: nothing to give up that will not lapse anyway
        assert time.monotonic() - started < 5.0
        wait = 10.0 if kind == "exclusive" else False  # an exclusive one waits for the lapse
        billing = near.channel("orders").durable("billing")
        with billing.consumer(auto_ack=False, wait=wait) as next_one:
            again: list[durables.Event] = []
            deadline = time.monotonic() + 15
            while len(again) < len(published) and time.monotonic() < deadline:
                again += next_one.fetch(timeout=1.0)
            assert [e.id for e in again] == published
            assert all(e.redelivered for e in again)
            next_one.commit()


def _blocked_reads(server: RedisProcess) -> int:
    """Clients blocked in XREADGROUP on the server now."""
    with server.client() as raw:
        return sum(1 for c in raw.client_list() if c["cmd"] == "xreadgroup" and "b" in c["flags"])


EU = {"region": "eu"}
LATER = {
    "unfiltered": [durables.Message("later")],
    "filtered": [durables.Message("later", properties=EU), durables.Message("us")],
}
"""What follows the lost read. Filtered: the next read (two at a time) skips an event the
filter leaves out, and a cumulative ack up to it would cover 'later' too."""


@pytest.mark.parametrize("case", sorted(LATER))
def test_a_read_whose_reply_was_lost_comes_first_when_the_next_read_reconnects(
    server: RedisProcess, server_url: str, namespace: str, connect: Connect, case: str
) -> None:
    """The server answers an exclusive consumer's blocked read, and the answer is lost in a
    black hole; the fetch ends while the server is still away. The next fetch's read makes
    the reconnection itself (in its own round trip, with no attach before it) and reads
    later events: the lost read's events come first all the same, and nothing is
    acknowledged unseen by the cumulative acks that follow."""
    settings = {
        **RIDE,
        "lease_timeout_s": 20.0,  # the lease holds through the whole outage
        "block_s": 2.0,
        "socket_timeout_s": 3.0,
        "connect_timeout_s": 1.0,
        "read_batch": 2,
    }
    with (
        FaultProxy(server.port) as proxy,
        connect(proxy.url, namespace=namespace, **settings) as client,
        durables.connect(server_url, namespace=namespace, **FAST) as near,
    ):
        selector = "region = 'eu'" if case == "filtered" else None
        durable = client.channel("orders").durable("billing", kind="exclusive", filter=selector)
        near_orders = near.channel("orders")
        with durable.consumer(auto_ack=True) as consumer:

            def answer_the_blocked_read_into_a_black_hole() -> None:
                assert wait_for(lambda: _blocked_reads(server) == 1, 10)
                proxy.blackhole()
                near_orders.publish_many(
                    [durables.Message(f"lost-reply-{i}", properties=EU) for i in range(2)]
                )

            staging = threading.Thread(target=answer_the_blocked_read_into_a_black_hole)
            staging.start()
            assert consumer.fetch(timeout=2.5) == []  # ends with the server away
            staging.join(10)
            billing = near_orders.durable("billing")
            assert billing.transaction_depth() == 2  # read, pending, the reply lost
            proxy.blackhole(False)
            near_orders.publish_many(LATER[case])
            got: list[str] = []
            deadline = time.monotonic() + 10
            while len(got) < 3 and time.monotonic() < deadline:
                got += [e.text for e in consumer.fetch(timeout=1.0)]  # auto-ack: cumulative
        assert got == ["lost-reply-0", "lost-reply-1", "later"]
        assert billing.depth() == 0
