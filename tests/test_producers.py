"""What a producer can count on: a retried publish with the same message id is stored
once, and a publish that asked for replicas never reports a success it did not get."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import durables
from durables.events import Batch, encode_event
from durables.ops import channels as channel_ops

from .conftest import FAST
from .faultproxy import FaultProxy
from .helpers import wait_for
from .servers import RedisProcess


def test_the_same_message_id_is_stored_once_and_its_first_id_returned(
    channel: durables.Channel,
) -> None:
    first = channel.publish("order 17", message_id="order-17")
    again = channel.publish("order 17 (retried)", message_id="order-17")
    other = channel.publish("order 18", message_id="order-18")
    assert again == first and other != first
    ids = channel.publish_many(
        [
            durables.Message("a", message_id="m-1"),
            durables.Message("a again", message_id="m-1"),
            durables.Message("no id"),
            durables.Message("order 18", message_id="order-18"),
        ]
    )
    assert ids[1] == ids[0] and ids[3] == other and len(set(ids)) == 3
    assert channel.info().length == 4  # order-17, order-18, m-1, no id
    with channel.durable("audit").consumer() as c:
        texts = [e.text for e in c.fetch(timeout=1)]
    assert texts == ["order 17", "order 18", "a", "no id"]


def test_every_event_carries_its_message_id_the_producers_own_when_none_was_given(
    channel: durables.Channel,
) -> None:
    channel.publish("a")
    channel.publish_many(
        [
            durables.Message("b"),
            durables.Message("c", message_id="order-9"),
            durables.Message("d", key="k", properties={"n": 1}),
        ]
    )
    channel.publish("e", properties={"region": "eu"}, ack_required=True)
    with channel.durable("audit").consumer() as c:
        got = {e.text: e.message_id for e in c.fetch(timeout=1)}
    producer = channel.ctx.producer.id
    assert got["c"] == "order-9"
    own = {text: mid for text, mid in got.items() if text != "c"}
    assert all(mid and mid.startswith(f"{producer}.") for mid in own.values()), got
    assert len(set(own.values())) == 4  # one sequence number each


def _raw_publish(channel: durables.Channel, lane: str, sequence: int, *texts: str) -> list[str]:
    """Send a publish as the library's retry sends it again: the same lane and sequence."""
    encoded = [encode_event(t, None, None, 1 << 20) for t in texts]
    op = channel_ops.publish(channel.keys, Batch.of(*encoded), 300_000, lane, sequence)
    return channel.executor.run(op)


def test_a_publish_sent_again_with_its_sequence_is_stored_once_and_gets_its_ids_again(
    channel: durables.Channel,
) -> None:
    first = _raw_publish(channel, "p.0", 1, "a", "b", "c")
    assert _raw_publish(channel, "p.0", 1, "a", "b", "c") == first
    other = _raw_publish(channel, "p.1", 1, "x")  # another producer's sequence 1
    assert _raw_publish(channel, "p.0", 4, "d")[0] not in first
    assert channel.info().length == 5 and other[0] not in first
    with pytest.raises(durables.StalePublishError, match="superseded"):
        _raw_publish(channel, "p.0", 1, "a", "b", "c")  # a stale copy, landing late
    assert channel.info().length == 5


def test_a_retried_publish_mixing_new_and_known_message_ids_gets_the_same_ids_again(
    channel: durables.Channel,
) -> None:
    known = channel.publish("m", message_id="m-1")
    batch = Batch.of(
        encode_event("m again", None, None, 1 << 20, message_id="m-1"),
        encode_event("keyed", "k1", None, 1 << 20),
        encode_event("plain", None, None, 1 << 20),
        encode_event("new id", None, None, 1 << 20, message_id="m-2"),
    )
    op = channel_ops.publish(channel.keys, batch, 300_000, "p.0", 1)
    ids = channel.executor.run(op)
    assert ids[0] == known and channel.executor.run(op) == ids
    assert channel.info().length == 4


@pytest.mark.slow
@pytest.mark.parametrize("lands_first", ["the first copy", "the retry"])
def test_a_publish_held_in_a_stalled_network_and_sent_again_is_stored_once(
    server: RedisProcess, server_url: str, namespace: str, lands_first: str
) -> None:
    """The request sits in a stalled connection; the heartbeat notices and the library
    sends it again on a new one. When the network heals both copies land, in either order:
    stored once, and the id returned is the one stored."""
    with (
        FaultProxy(server.port) as proxy,
        durables.connect(proxy.url, namespace=namespace, **FAST) as far,
        durables.connect(server_url, namespace=namespace, **FAST) as near,
    ):
        ch = far.channel("orders")
        ch.publish("before")
        returned: list[str] = []
        proxy.stall()
        publisher = threading.Thread(target=lambda: returned.append(ch.publish("held")))
        publisher.start()
        assert wait_for(lambda: far.state == "reconnecting", 10)
        if lands_first == "the retry":
            proxy.stall(later=False)  # new connections pass; the first copy stays held
            assert wait_for(lambda: returned, 10)
        proxy.stall(False)  # the network heals: whatever is held lands now
        publisher.join(15)
        time.sleep(0.3)  # the first copy's landing, when it lands last
        near_ch = near.channel("orders")
        near_ch.publish("after")
        entries: Any = near.redis.xrange(near_ch.keys.stream)
        assert [fields[b"d"] for _, fields in entries] == [b"before", b"held", b"after"]
        assert [entries[1][0]] == [r.encode() for r in returned]


def test_a_message_id_is_forgotten_after_the_dedupe_window(server_url: str, namespace: str) -> None:
    with durables.connect(server_url, namespace=namespace, dedupe_window_s=0.2, **FAST) as c:
        ch = c.channel("orders")
        first = ch.publish("x", message_id="m")
        time.sleep(0.3)
        assert ch.publish("x", message_id="m") != first


def test_a_publish_asking_for_more_replicas_than_confirm_raises_but_the_event_is_stored(
    channel: durables.Channel,
) -> None:
    with pytest.raises(durables.ReplicationError, match="only 0 of 1 replica") as caught:
        channel.publish("x", replicas=1, replica_timeout=0.1)
    assert caught.value.confirmed == 0
    (stored,) = caught.value.event_ids
    assert channel.info().last_id == stored  # stored on the primary, not confirmed
    assert channel.publish("y", replicas=0)  # no wait asked: plain success


def test_replicas_from_the_settings_apply_to_every_publish(server_url: str, namespace: str) -> None:
    with durables.connect(
        server_url, namespace=namespace, replicas=1, replica_timeout_s=0.1, **FAST
    ) as client:
        ch = client.channel("orders")
        with pytest.raises(durables.ReplicationError):
            ch.publish_many([durables.Message("a"), durables.Message("b")])
        assert ch.info().length == 2


@pytest.mark.parametrize(
    "kwargs",
    [
        {"message_id": ""},
        {"message_id": 17},
        {"message_id": "x" * 201},
        {"replicas": -1},
        {"replicas": True},
        {"replica_timeout": 0},
        {"replica_timeout": "soon"},
    ],
)
def test_bad_producer_options_are_refused_and_nothing_is_stored(
    channel: durables.Channel, kwargs: dict[str, object]
) -> None:
    with pytest.raises(durables.DurablesError):
        channel.publish("x", **kwargs)  # type: ignore[arg-type]
    assert channel.info().length == 0


class Keep:
    def __init__(self) -> None:
        self.got: list[durables.Event] = []

    def on_event(self, event: durables.Event) -> None:
        self.got.append(event)


def test_deleting_a_channel_leaves_none_of_its_keys(client: durables.Client) -> None:
    ch = client.channel("orders")
    s = client.session("phone", timeout=30, max_depth=5, auto_ack=False)
    s.register_interest("orders")
    s.add_listener("orders", keep := Keep())
    s.ready_for_events()
    ch.publish("x", message_id="m1", ack_required=True, ack_timeout=0.1)
    assert wait_for(lambda: keep.got, 10)
    time.sleep(0.2)
    client.housekeep()  # records a nack for the event nobody acknowledged
    assert ch.nacks()
    s.close(keepalive=True)
    assert ch.delete()
    assert client.redis.keys(f"{client.namespace}:{{orders}}:*") == []


def test_a_client_may_publish_without_idempotence_then_a_retry_stores_it_again(
    server_url: str, namespace: str
) -> None:
    """`idempotent_publish=False` (the benchmark's comparison): a plain append, no message
    id of the producer's own; a copy sent again is stored again."""
    with durables.connect(
        server_url, namespace=namespace, idempotent_publish=False, **FAST
    ) as client:
        ch = client.channel("orders")
        ch.publish("a")
        ch.publish("b", message_id="order-1")
        again = _raw_publish(ch, "", 0, "c") + _raw_publish(ch, "", 0, "c")
        assert len(set(again)) == 2 and ch.info().length == 4
        with ch.durable("audit").consumer() as c:
            got = {e.text: e.message_id for e in c.fetch(timeout=1)}
        assert got == {"a": None, "b": "order-1", "c": None}
