"""A publish stored twice (two entries, one message id: a failover lost the first copy's
record of its producer, or a producer retried with its own `message_id` after the window)
reaches no application twice: every kind of reader and a session discard the second
copy, count it, and acknowledge it; an event delivered again (the same entry) is not
discarded but flagged."""

from __future__ import annotations

import time
from typing import Any

import pytest

import durables

from .helpers import fetch_all, wait_for

pytestmark = [pytest.mark.on_cluster, pytest.mark.both_clients]


def _stored_twice(client: durables.Client, channel: durables.Channel, text: str) -> str:
    """Publish `text`, then append a second entry with its message id (as a failover that
    lost the first copy's record, and a retry, leave it); the message id."""
    channel.publish(text)
    return _copy_newest(client, channel)


def _copy_newest(client: durables.Client, channel: durables.Channel) -> str:
    """Append a second entry with the newest event's payload and message id; the id."""
    raw: Any = client.redis
    ((_, fields),) = raw.xrevrange(channel.keys.stream, count=1)
    raw.xadd(channel.keys.stream, {"d": fields[b"d"], "m": fields[b"m"]})
    return str(fields[b"m"].decode())


@pytest.mark.parametrize("kind", ["exclusive", "shared", "serial"])
def test_a_consumer_of_every_kind_discards_a_publish_stored_twice_and_counts_it(
    client: durables.Client, channel: durables.Channel, kind: durables.Kind
) -> None:
    dur = channel.durable("audit", kind=kind)
    _stored_twice(client, channel, "a")
    channel.publish("b")
    got: list[durables.Event] = []
    prefetch = None if kind == "exclusive" else 10
    with dur.consumer("c1", auto_ack=False, prefetch=prefetch) as c:
        deadline = time.monotonic() + 10
        while len(got) < 2 and time.monotonic() < deadline:
            got += c.fetch(timeout=0.5)
        got += c.fetch(timeout=0.3)
        assert [e.text for e in got] == ["a", "b"]
        assert c.discarded == 1
        if kind == "exclusive":
            got[-1].ack()
        else:
            c.commit()
        assert wait_for(lambda: dur.transaction_depth() == 0 and dur.depth() == 0, 10)


@pytest.mark.parametrize("kind", ["exclusive", "shared", "serial"])
def test_a_copy_stored_after_its_event_was_read_is_discarded_at_a_later_read(
    client: durables.Client, channel: durables.Channel, kind: durables.Kind
) -> None:
    """The first copy came in a read of its own (its batch's message ids remembered at
    once); the second comes in a later read, beside a new event."""
    dur = channel.durable("audit", kind=kind)
    prefetch = None if kind == "exclusive" else 10
    with dur.consumer("c1", auto_ack=True, prefetch=prefetch) as c:
        channel.publish("a")
        assert [e.text for e in fetch_all(c, 1, timeout=10)] == ["a"]
        _copy_newest(client, channel)  # a's copy
        channel.publish("b")
        later = fetch_all(c, 1, timeout=10)
        later += c.fetch(timeout=0.3)
        assert [e.text for e in later] == ["b"]
        assert c.discarded == 1


def test_a_subscription_discards_a_publish_stored_twice(
    client: durables.Client, channel: durables.Channel
) -> None:
    dur = channel.durable("audit", kind="shared")
    got: list[str] = []
    sub = dur.subscribe(lambda e: got.append(e.text), window=4, auto_ack=True)
    try:
        _stored_twice(client, channel, "a")
        channel.publish("b")
        assert wait_for(lambda: len(got) >= 2, 10)
        time.sleep(0.3)
        assert got == ["a", "b"]
        assert wait_for(lambda: dur.transaction_depth() == 0, 10)
    finally:
        sub.close()


class Keep:
    def __init__(self) -> None:
        self.got: list[durables.Event] = []

    def on_event(self, event: durables.Event) -> None:
        self.got.append(event)


def test_a_session_discards_a_publish_stored_twice_and_counts_it(
    client: durables.Client, channel: durables.Channel
) -> None:
    s = client.session("phone", timeout=30)
    s.register_interest("orders")
    s.add_listener("orders", keep := Keep())
    s.ready_for_events()
    _stored_twice(client, channel, "a")
    channel.publish("b")
    assert wait_for(lambda: len(keep.got) >= 2, 10)
    time.sleep(0.3)
    assert [e.text for e in keep.got] == ["a", "b"]
    assert s.discarded == 1
    s.close()


def test_the_same_message_id_on_two_channels_is_two_events_for_a_session(
    client: durables.Client,
) -> None:
    keep = Keep()
    s = client.session("phone", timeout=30)
    for name in ("eu", "us"):
        client.channel(name)
        s.register_interest(name)
        s.add_listener(name, keep)
    s.ready_for_events()
    client.channel("eu").publish("x", message_id="order-1")
    client.channel("us").publish("x", message_id="order-1")
    assert wait_for(lambda: len(keep.got) >= 2, 10)
    assert sorted(e.channel for e in keep.got) == ["eu", "us"] and s.discarded == 0
    s.close()
