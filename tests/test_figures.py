"""`client.figures()`: what an operator looks at, in one read (the web console's source),
and `client.discard_session()`, closing a session from outside."""

from __future__ import annotations

import os
import socket
import time

import pytest

import durables

from .helpers import fetch_all

pytestmark = [pytest.mark.both_clients, pytest.mark.on_cluster]


def test_figures_show_windows_holder_lag_and_the_oldest_unacknowledged_age(
    client: durables.Client,
) -> None:
    orders = client.channel("orders")
    billing = orders.durable("billing", kind="shared", start="earliest")
    audit = orders.durable("audit", kind="exclusive", start="earliest")
    orders.publish_many([durables.Message(b"%d" % i) for i in range(5)])
    with billing.consumer("w1", prefetch=2) as worker, audit.consumer("a1"):
        assert len(fetch_all(worker, 2)) == 2
        time.sleep(0.3)
        figures = client.figures()
        (channel,) = figures.channels
        assert (channel.info.name, channel.added) == ("orders", 5)
        assert channel.retained_bytes is not None and channel.retained_bytes > 0
        found = {d.info.name: d for d in channel.durables}
        shared = found["billing"]
        assert [w.split("#")[0] for w in shared.windows] == ["w1"]
        assert list(shared.windows.values()) == [2]
        assert (shared.info.depth, shared.info.transaction_depth) == (3, 2)
        assert 0.3 <= shared.oldest_unacked_age_s < 30
        assert shared.acknowledged == 0
        exclusive = found["audit"]
        assert exclusive.windows == {}
        assert [c.split("@")[0] for c in exclusive.info.consumers] == ["a1"]
        assert exclusive.lag == 5 and exclusive.oldest_unacked_age_s >= 0.3  # not handed out
        worker.commit()
    after = {d.info.name: d for d in client.figures().channels[0].durables}
    assert after["billing"].acknowledged == 2
    assert after["billing"].oldest_unacked_age_s >= 0.3  # three events not handed out yet
    assert figures.server.get("redis_version")
    assert figures.server_ms > 0


def test_figures_show_a_sessions_queue_its_limits_and_the_keepalive_left(
    client: durables.Client,
) -> None:
    prices = client.channel("prices")
    session = client.session("mobile-42", timeout=30, max_depth=100, disconnected_max_depth=500)
    session.register_interest("prices")
    (live,) = client.figures().sessions
    assert (live.record.id, live.live, live.keepalive_left_s) == ("mobile-42", True, None)
    session.close(keepalive=True)
    prices.publish_many([durables.Message(b"x") for _ in range(3)])
    (away,) = client.figures().sessions
    assert (away.live, away.queue_depth) == (False, 3)
    assert (away.max_depth, away.disconnected_max_depth) == (100, 500)
    assert away.keepalive_left_s is not None and 25 < away.keepalive_left_s <= 30


def test_a_channel_without_events_is_shown_and_one_without_its_keys_left_out(
    client: durables.Client, namespace: str
) -> None:
    client.channel("orders").publish(b"x")
    client.channel("quiet")  # nothing published yet: no stream
    client.redis.sadd(f"{namespace}:channels", "half-made")
    found = client.figures().channels
    assert [(c.info.name, c.info.length, c.added) for c in found] == [
        ("orders", 1, 1),
        ("quiet", 0, 0),
    ]


def test_an_operator_closes_a_session_from_outside(client: durables.Client) -> None:
    client.channel("prices")
    session = client.session("away", timeout=60)
    session.register_interest("prices")
    session.close(keepalive=True)
    assert client.discard_session("away", "the night shift") is True
    assert client.sessions() == []
    assert "'away' was closed by the night shift" in client.alerts(1)[0]["message"]
    assert client.discard_session("away") is False


def test_the_oldest_age_counts_events_not_handed_out_and_a_filter_holds_only_matches(
    client: durables.Client,
) -> None:
    orders = client.channel("orders")
    orders.durable("idle", start="earliest")  # no consumer: nothing handed out
    eu = orders.durable("eu", kind="exclusive", start="earliest", filter="region = 'eu'")
    orders.publish_many(
        [
            durables.Message(b"%d" % i, properties={"region": region})
            for i, region in enumerate(["eu", "us", "us", "eu", "us"])
        ]
    )
    with eu.consumer("e1") as holder:
        assert len(fetch_all(holder, 2)) == 2  # the two eu events, held unacknowledged
        time.sleep(0.5)
        found = {d.info.name: d for d in client.figures().channels[0].durables}
        assert found["idle"].oldest_unacked_age_s >= 0.5
        assert found["idle"].lag == 5 and found["idle"].info.transaction_depth == 0
        assert found["eu"].info.transaction_depth == 2
        assert eu.transaction_depth() == 2


def test_a_session_past_its_keepalive_shows_expired_before_housekeeping(
    client: durables.Client,
) -> None:
    prices = client.channel("prices")
    session = client.session("brief", timeout=1)
    session.register_interest("prices")
    session.close(keepalive=True)
    prices.publish(b"x")
    time.sleep(1.2)
    (away,) = client.figures().sessions
    assert (away.state, away.keepalive_left_s, away.queue_depth) == ("expired", 0.0, 1)


def test_figures_name_what_retains_a_channel_and_who_is_attached_where(
    client: durables.Client,
) -> None:
    orders = client.channel("orders")
    billing = orders.durable("billing", kind="shared", start="earliest")
    session = client.session("mobile-42", timeout=60)
    session.register_interest("orders")
    session.close(keepalive=True)  # away: its queue holds the channel's events
    orders.publish_many([durables.Message(b"%d" % i) for i in range(3)])
    with billing.consumer("w1", prefetch=3) as worker:
        assert len(fetch_all(worker, 3)) == 3
        worker.commit()
        (channel,) = client.figures().channels
        assert channel.retained_by == "session mobile-42"
        (consumer,) = channel.durables[0].consumers
        assert (consumer.name, consumer.window, consumer.held) == ("w1", 3, 0)
        assert consumer.pid == os.getpid() and consumer.host == socket.gethostname()
        assert consumer.lease_left_s is not None and consumer.lease_left_s > 0
        assert consumer.last_seen_s is not None and consumer.last_seen_s < 30


def test_browsing_shows_events_and_delivers_nothing(client: durables.Client) -> None:
    orders = client.channel("orders")
    eu = orders.durable("eu", start="earliest", filter="region = 'eu'")
    orders.publish_many(
        [
            durables.Message(b"event %d" % i, properties={"region": r})
            for i, r in enumerate(["us", "eu", "eu"])
        ]
    )
    assert [e.text for e in orders.browse(2)] == ["event 2", "event 1"]
    assert [e.text for e in eu.browse(5)] == ["event 1", "event 2"]
    assert (eu.depth(), eu.transaction_depth()) == (2, 0)


def test_redeliveries_are_counted_on_the_server_for_every_kind(client: durables.Client) -> None:
    orders = client.channel("orders")
    audit = orders.durable("audit", kind="exclusive", start="earliest")
    billing = orders.durable("billing", kind="shared", start="earliest")
    orders.publish_many([durables.Message(b"%d" % i) for i in range(3)])
    with audit.consumer("a1", auto_ack=False) as holder:
        assert len(fetch_all(holder, 3)) == 3  # held, not acknowledged: inherited next
    with audit.consumer("a2", auto_ack=False) as holder:
        assert [e.redelivered for e in fetch_all(holder, 3)] == [True] * 3
    with billing.consumer("w1", prefetch=3) as worker:
        assert len(fetch_all(worker, 3)) == 3
        worker.rollback()
        assert len(fetch_all(worker, 3)) == 3
        worker.commit()
    found = {d.info.name: d.redelivered for d in client.figures().channels[0].durables}
    assert found == {"audit": 3, "billing": 3}
