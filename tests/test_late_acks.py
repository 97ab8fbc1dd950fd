"""Acknowledgements from a consumer detached meanwhile (a pause past its lease, an outage)
of a shared or serial durable: its events were dealt again, so its late acks must not
count. An `XACK` does not check which consumer holds an event; sent plainly, it took the
event out of the dispatcher's sight while its new holder still worked on it, and a
serial durable dealt the next event beside it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal, cast

import pytest

import durables
from durables.io.context import Context
from durables.keys import ChannelKeys
from durables.readers.shared.reader import SharedReader

from .conftest import FAST, Connect
from .helpers import texts
from .servers import RedisProcess

pytestmark = pytest.mark.both_clients

# only the lapse each test makes; taps that outlive the test's steps
SETTINGS = {**FAST, "lease_timeout_s": 30.0, "block_s": 5.0, "socket_timeout_s": 10.0}


@contextmanager
def two_consumers(
    server: RedisProcess,
    namespace: str,
    connect: Connect,
    kind: Literal["shared", "serial"],
    prefetch: int,
    auto_ack: bool | None = None,
) -> Iterator[tuple[durables.Channel, durables.Consumer, durables.Consumer]]:
    with connect(server.url, namespace=namespace, **SETTINGS) as client:
        channel = client.channel("orders")
        dur = channel.durable("line", kind=kind)
        one = dur.consumer("one", prefetch=prefetch, auto_ack=auto_ack)
        two = dur.consumer("two", prefetch=prefetch, auto_ack=auto_ack)
        try:
            yield channel, one, two
        finally:
            one.close()
            two.close()


def lapse(server: RedisProcess, namespace: str, name: str) -> None:
    """The lease of consumer `name` lapsed, as after a long pause."""
    alive = ChannelKeys(namespace, "orders").alive("line")
    with server.client() as raw:
        (member,) = [m for m in raw.zrange(alive, 0, -1) if m.startswith(f"{name}#".encode())]
        raw.zadd(alive, {member: 0})


def holders(server: RedisProcess, namespace: str) -> dict[str, int]:
    """Pending events per consumer of the durable, by consumer name."""
    stream = ChannelKeys(namespace, "orders").stream
    with server.client() as raw:
        summary = raw.xpending(stream, "line")
    return {c["name"].decode().split("#")[0]: c["pending"] for c in summary["consumers"]}


def test_a_late_ack_of_a_detached_serial_consumer_does_not_pass_the_line_on(
    server: RedisProcess, namespace: str, connect: Connect
) -> None:
    with two_consumers(server, namespace, connect, "serial", prefetch=2) as (channel, one, two):
        channel.publish("e1")
        (first,) = one.fetch(timeout=3)
        lapse(server, namespace, "one")
        (again,) = two.fetch(timeout=1)  # detaches one: e1 is two's now
        assert again.text == "e1" and again.redelivered
        channel.publish("e2")
        first.ack()  # late: refused
        assert holders(server, namespace) == {"two": 1}
        assert one.fetch(timeout=0.5) == []  # two holds the line
        again.ack()
        assert texts(two.fetch(timeout=1) or one.fetch(timeout=1)) == ["e2"]


def test_a_late_ack_through_a_serial_consumers_tap_is_not_made(
    server: RedisProcess, namespace: str, connect: Connect
) -> None:
    """The steady fetch of a serial consumer carries the acks of the last with its read
    through its tap: detaching closed the tap, so they are not made."""
    with two_consumers(server, namespace, connect, "serial", prefetch=2, auto_ack=True) as (
        channel,
        one,
        two,
    ):
        channel.publish("e1")
        assert texts(one.fetch(timeout=3)) == ["e1"]  # its tap stays open
        lapse(server, namespace, "one")
        (again,) = two.fetch(timeout=1)
        assert again.text == "e1" and again.redelivered
        channel.publish("e2")
        assert one.fetch(timeout=0.5) == []  # acks e1 (late), then finds the line taken
        assert holders(server, namespace) == {"two": 1}
        assert texts(two.fetch(timeout=1)) == ["e2"]  # acks e1 with the read


def test_a_late_ack_of_a_detached_shared_consumer_keeps_the_window(
    server: RedisProcess, namespace: str, connect: Connect
) -> None:
    """A window counts what its member holds: a late ack of an event dealt again must not
    free the new holder's room while it still works on the event."""
    with two_consumers(server, namespace, connect, "shared", prefetch=1) as (channel, one, two):
        channel.publish("e1")
        (first,) = one.fetch(timeout=3)
        lapse(server, namespace, "one")
        (again,) = two.fetch(timeout=1)
        assert again.text == "e1" and again.redelivered
        channel.publish("e2")
        first.ack()  # late: refused
        assert holders(server, namespace) == {"two": 1}
        assert texts(one.fetch(timeout=1)) == ["e2"]  # joins again, as a new member
        assert holders(server, namespace) == {"two": 1, "one": 1}
        first.ack()  # still not its own to acknowledge
        assert holders(server, namespace) == {"two": 1, "one": 1}


def test_an_idle_shared_consumer_makes_its_acks_only_while_its_door_is_open(
    server: RedisProcess, namespace: str, connect: Connect
) -> None:
    """An idle consumer's wait carries the acks of its last fetch: detaching closed its
    door, so they are not made, and it joins again as a new member."""
    with two_consumers(server, namespace, connect, "shared", prefetch=5, auto_ack=True) as (
        channel,
        one,
        two,
    ):
        assert one.fetch(timeout=0.3) == []  # its door opens: it may wait on its own
        channel.publish("e1")
        assert texts(one.fetch(timeout=3)) == ["e1"]
        lapse(server, namespace, "one")
        (again,) = two.fetch(timeout=1)
        assert again.text == "e1" and again.redelivered
        assert one.fetch(timeout=0.5) == []  # acks e1 (late) as it waits
        assert holders(server, namespace) == {"two": 1}


def test_acks_made_before_the_consumer_attached_again_do_not_count_after(
    server: RedisProcess, namespace: str
) -> None:
    """Another thread's acknowledgement, made before the consumer learnt it was detached
    and sent after it attached again: the consumer is a member then, but the events it
    held were dealt again. (The interleaving of the two threads, step by step.)"""
    with durables.connect(server.url, namespace=namespace, **SETTINGS) as client:
        channel = client.channel("orders")
        dur = channel.durable("line", kind="serial")
        with dur.consumer("one", prefetch=2) as one, dur.consumer("two", prefetch=2) as two:
            channel.publish("e1")
            (first,) = one.fetch(timeout=3)
            lapse(server, namespace, "one")
            (again,) = two.fetch(timeout=1)
            assert again.text == "e1" and again.redelivered
            reader = cast(SharedReader[Context], one.reader)
            with reader.lock:  # the acknowledging thread: made, not sent yet
                reader.state.commit([first])
                late = reader.state.flush()
            # the fetching thread: joins again, as a new member
            reader.ctx.executor.drive(reader.attaching())
            assert holders(server, namespace) == {"two": 1}
            assert reader.ctx.executor.run_all(late) == [False]  # refused
            assert holders(server, namespace) == {"two": 1}
            channel.publish("e2")
            assert one.fetch(timeout=0.5) == []  # two holds the line


def test_acks_made_before_attaching_again_within_the_lease_are_made_later(
    server: RedisProcess, namespace: str
) -> None:
    """The same interleaving after an outage shorter than the lease: the events are still
    the consumer's, so the refused acknowledgement is made with a later fetch (the event
    comes back in its pending list, as after a lost acknowledgement), and nothing is
    handed out twice."""
    with durables.connect(server.url, namespace=namespace, **SETTINGS) as client:
        channel = client.channel("orders")
        dur = channel.durable("line", kind="serial")
        with dur.consumer("one", prefetch=2) as one:
            channel.publish("e1")
            (first,) = one.fetch(timeout=3)
            reader = cast(SharedReader[Context], one.reader)
            with reader.lock:
                reader.state.commit([first])
                late = reader.state.flush()
            reader.ctx.executor.drive(reader.attaching())  # a member still: it keeps what it held
            assert reader.ctx.executor.run_all(late) == [False]
            assert holders(server, namespace) == {"one": 1}
            assert one.fetch(timeout=0.3) == []  # e1 is not handed out again, but acknowledged
            assert holders(server, namespace) == {}
            channel.publish("e2")
            assert texts(one.fetch(timeout=1)) == ["e2"]
