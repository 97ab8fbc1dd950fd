"""What a producer can count on: a retried publish with the same message id is stored
once, and a publish that asked for replicas never reports a success it did not get."""

from __future__ import annotations

import time

import pytest

import durables

from .conftest import FAST
from .helpers import wait_for


def test_the_same_message_id_is_stored_once_and_its_first_id_returned(
    channel: durables.Channel,
) -> None:
    first = channel.publish("order 17", message_id="order-17")
    again = channel.publish("order 17 (retried)", message_id="order-17")
    other = channel.publish("order 18", message_id="order-18")
    assert again == first and other != first
    ids = channel.publish_many(
        [durables.Message("a", message_id="m-1"), durables.Message("a again", message_id="m-1"),
         durables.Message("no id"), durables.Message("order 18", message_id="order-18")]
    )  # fmt: skip
    assert ids[1] == ids[0] and ids[3] == other and len(set(ids)) == 3
    assert channel.info().length == 4  # order-17, order-18, m-1, no id
    with channel.durable("audit").consumer() as c:
        texts = [e.text for e in c.fetch(timeout=1)]
    assert texts == ["order 17", "order 18", "a", "no id"]


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
    with durables.connect(server_url, namespace=namespace, replicas=1,
                          replica_timeout_s=0.1, **FAST) as client:  # fmt: skip
        ch = client.channel("orders")
        with pytest.raises(durables.ReplicationError):
            ch.publish_many([durables.Message("a"), durables.Message("b")])
        assert ch.info().length == 2


@pytest.mark.parametrize(
    "kwargs",
    [{"message_id": ""}, {"message_id": 17}, {"message_id": "x" * 201}, {"replicas": -1},
     {"replicas": True}, {"replica_timeout": 0}, {"replica_timeout": "soon"}],
)  # fmt: skip
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
