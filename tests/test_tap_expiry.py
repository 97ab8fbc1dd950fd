"""A tap that expired by itself while still listed (its reader stopped renewing it).

A dispatcher's fetch lists the taps without looking at each one, so a tap listed but gone
must be made again when its member's fetch renews it, and must not keep a serial line
taken for another member.
"""

from __future__ import annotations

import redis

from durables.keys import ChannelKeys

from .conftest import FAST, Connect
from .helpers import publish, texts
from .servers import RedisProcess


def _listed_tap(raw: redis.Redis, taps: str, consumer: str) -> bytes:
    """The tap key (not the door) listed for the consumer whose name is `consumer`."""
    listed: dict[bytes, bytes] = raw.hgetall(taps)  # type: ignore[assignment]
    mine = consumer.encode() + b"#"
    (tap,) = [k for k, v in listed.items() if b":tap:" in k and v.startswith(mine)]
    return tap


def test_a_busy_shared_consumers_expired_tap_is_made_again_at_its_next_fetch(
    server: RedisProcess, namespace: str, connect: Connect
) -> None:
    with connect(server.url, namespace=namespace, **FAST) as client:
        channel = client.channel("orders")
        taps = ChannelKeys(namespace, "orders").taps("work")
        with (
            client.channel("orders")
            .durable("work", kind="shared")
            .consumer("one", prefetch=5, auto_ack=True) as one
        ):
            publish(channel, 20)
            assert texts(one.fetch(timeout=1)) == [f"e{i}" for i in range(1, 6)]
            assert texts(one.fetch(timeout=1)) == [f"e{i}" for i in range(6, 11)]  # busy: tap
            with server.client() as raw:
                tap = _listed_tap(raw, taps, "one")
                raw.delete(tap)  # as if it expired: still listed
                assert texts(one.fetch(timeout=1)) == [f"e{i}" for i in range(11, 16)]
                assert raw.exists(tap) == 1  # renewed by making it again
                assert raw.pttl(tap) > 0
            assert texts(one.fetch(timeout=1)) == [f"e{i}" for i in range(16, 21)]


def test_a_serial_holders_expired_tap_does_not_keep_the_line_from_another_member(
    server: RedisProcess, namespace: str, connect: Connect
) -> None:
    settings = {**FAST, "lease_timeout_s": 10.0, "block_s": 5.0}  # its tap outlives the steps
    with connect(server.url, namespace=namespace, **settings) as client:
        channel = client.channel("orders")
        taps = ChannelKeys(namespace, "orders").taps("line")
        dur = channel.durable("line", kind="serial")
        with (
            dur.consumer("one", prefetch=2, auto_ack=True) as one,
            dur.consumer("two", prefetch=2, auto_ack=True) as two,
        ):
            channel.publish("e1")
            assert texts(one.fetch(timeout=1)) == ["e1"]  # through its tap
            assert one.fetch(timeout=0.3) == []  # acknowledged; its tap stays open a while
            with server.client() as raw:
                tap = _listed_tap(raw, taps, "one")
                raw.delete(tap)  # as if it expired: one stopped asking, still listed
            channel.publish("e2")
            assert texts(two.fetch(timeout=1)) == ["e2"]  # the line is free
