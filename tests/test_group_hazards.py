"""Known consumer-group hazards of Redis after faults, reproduced on a real server by
putting the group into the state the fault leaves behind.

- redis/redis#5433: after a Sentinel failover the new primary had not yet seen some
  `XACK`s, so acknowledged entries are handed out again.
- redis/redis#7105: after an AOF restart a group's last-delivered-id moved backwards, so
  `XREADGROUP >` returns acknowledged entries once more.

Both leave a group whose last-delivered-id is behind what its consumers have already
acknowledged (`XGROUP SETID` makes exactly that state). durables absorbs it: the
consumer's position only moves forward, the entries that come back are acknowledged
and counted (`discarded`), never handed out twice, and nothing is lost.
"""

from __future__ import annotations

import pytest

import durables
from durables.keys import ChannelKeys

from .checker import Checker
from .conftest import FAST, Connect
from .helpers import fetch_all, publish, wait_for
from .servers import RedisProcess

pytestmark = pytest.mark.both_clients


def roll_back(server: RedisProcess, namespace: str, group: str, to: str = "0") -> None:
    """The group forgets what it delivered, as #5433 / #7105 leave it."""
    stream = ChannelKeys(namespace, "orders").stream
    with server.client() as raw:
        raw.xgroup_setid(stream, group, to)


def checked(published: list[str], got: list[durables.Event], duplicated: int = 0) -> Checker:
    """The run checker over `got`: no loss, no unflagged duplicate, no reordering, and
    exactly `duplicated` duplicates (all flagged)."""
    checker = Checker()
    for i, event_id in enumerate(published, start=1):
        checker.attempt(f"e{i}")
        checker.confirm(f"e{i}", event_id)
    for event in got:
        checker.deliver_event("c1", event)
    print(checker.report())
    assert checker.report().ok, checker.explain()
    assert checker.report().duplicated == duplicated
    return checker


@pytest.mark.parametrize("kind", ["exclusive", "shared", "serial"])
def test_a_group_rolled_back_delivers_nothing_twice_and_loses_nothing(
    server: RedisProcess, namespace: str, channel: durables.Channel, kind: durables.Kind
) -> None:
    dur = channel.durable("audit", kind=kind)
    first = publish(channel, 5)
    with dur.consumer("c1") as c:
        got = fetch_all(c, 5)
        c.commit()
        assert dur.transaction_depth() == 0
        roll_back(server, namespace, "audit")
        later = publish(channel, 3, start=6)
        got += fetch_all(c, 3, timeout=3)
        assert c.fetch(timeout=0.3) == []  # nothing more: e1..e5 were not handed out again
        c.commit()
        assert c.discarded == 5
    checked(first + later, got)
    assert [e.text for e in got] == [f"e{i}" for i in range(1, 9)]
    assert dur.depth() == 0 and dur.transaction_depth() == 0


def test_a_session_group_rolled_back_delivers_nothing_twice(
    server: RedisProcess, namespace: str, client: durables.Client, channel: durables.Channel
) -> None:
    got: list[durables.Event] = []

    class Listener:
        def on_event(self, event: durables.Event) -> None:
            got.append(event)

    with client.session("mobile", timeout=30) as s:
        s.register_interest("orders")
        s.add_listener("orders", Listener())
        s.ready_for_events()
        first = publish(channel, 5)
        assert wait_for(lambda: len(got) == 5, timeout=5)
        roll_back(server, namespace, "~session:mobile")
        later = publish(channel, 3, start=6)
        assert wait_for(lambda: len(got) >= 8, timeout=5)
        assert not wait_for(lambda: len(got) > 8, timeout=0.5)
        assert s.discarded == 5
    checked(first + later, got)


@pytest.mark.parametrize("kind", ["exclusive", "shared"])
def test_acknowledged_events_pending_again_come_back_flagged_never_lost(
    server: RedisProcess, namespace: str, kind: durables.Kind
) -> None:
    # #5433 as a new consumer meets it: the XACKs did not survive, so the events sit in
    # the pending list of a consumer that is gone. They are delivered again, flagged.
    client = durables.connect(server.url, namespace=namespace, **FAST, orphan_ttl_s=0)
    channel = client.channel("orders")
    dur = channel.durable("audit", kind=kind)
    first = publish(channel, 5)
    with client:
        with dur.consumer("c1") as c:
            got = fetch_all(c, 5)
        roll_back(server, namespace, "audit")
        with server.client() as raw:
            raw.xreadgroup("audit", "ghost", {ChannelKeys(namespace, "orders").stream: ">"})
        later = publish(channel, 2, start=6)
        with dur.consumer("c2") as c:
            if kind == "shared":
                client.housekeep()  # the reaper hands a vanished consumer's events back
            again = fetch_all(c, 7, timeout=5)
    assert [e.text for e in again] == [f"e{i}" for i in range(1, 8)]
    assert all(e.redelivered for e in again[:5]) and not any(e.redelivered for e in again[5:])
    checked(first + later, got + again, duplicated=5)
    with durables.connect(server.url, namespace=namespace, **FAST) as admin:
        dur = admin.channel("orders").durable("audit", kind=kind)
        assert dur.depth() == 0 and dur.transaction_depth() == 0


def test_housekeeping_drops_the_redelivery_counts_of_events_gone_from_the_channel(
    server: RedisProcess, namespace: str, connect: Connect
) -> None:
    # A consumer whose lease lapsed acknowledges late an event dealt again since: its plain
    # acknowledgement does not know of the count, which stays (put in place here).
    keys = ChannelKeys(namespace, "orders")
    with connect(server.url, namespace=namespace, **FAST) as client:
        channel = client.channel("orders")
        dur = channel.durable("audit", kind="shared")
        ids = publish(channel, 3)
        with dur.consumer("c1", prefetch=3) as c:
            got = fetch_all(c, 3)
            got[2].rollback()  # e3 comes back with a count of its own, and stays pending
            got[0].ack()
            got[1].ack()
            c.commit()
            with server.client() as raw:
                raw.hset(keys.redeliveries("audit"), ids[0], 1)  # the late ack's leftover
                client.housekeep()
                counts = raw.hgetall(keys.redeliveries("audit"))
                assert raw.xlen(keys.stream) == 1  # e1 and e2 went, acknowledged
    assert counts == {ids[2].encode(): b"1"}
