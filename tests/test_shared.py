"""Shared durables: round robin, windows, rollback, crash recovery, dead letters, filters.

Idle consumers waiting for events are in `test_shared_idle.py`, serial durables in
`test_serial.py`."""

from __future__ import annotations

import os
import signal
import textwrap
import time

import pytest
from redis import Redis

import durables
from durables import ConfigError, InvalidWindowError

from .children import first_line, python_child
from .helpers import command_calls, fetch_all, publish, texts

pytestmark = [pytest.mark.on_cluster, pytest.mark.both_clients]


def test_two_shared_consumers_get_alternate_events_as_the_seed_says(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("work", kind="shared")
    with dur.consumer("one", prefetch=10) as one, dur.consumer("two", prefetch=10) as two:
        publish(channel, 10)
        first, second = one.fetch(timeout=2), two.fetch(timeout=2)
        assert texts(first) == ["e1", "e3", "e5", "e7", "e9"]
        assert texts(second) == ["e2", "e4", "e6", "e8", "e10"]
        assert dur.depth() == 0 and dur.transaction_depth() == 10


def test_round_robin_goes_on_where_it_stopped(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared")
    with dur.consumer("one") as one, dur.consumer("two") as two:
        publish(channel, 3)
        got_one = one.fetch(timeout=2)
        publish(channel, 3, start=4)
        got_two = two.fetch(timeout=2)
        got_one += one.fetch(timeout=2)
    assert texts(got_one) == ["e1", "e3", "e5"] and texts(got_two) == ["e2", "e4", "e6"]


def test_busy_consumers_keep_their_taps_and_turn_the_ring_in_place(
    channel: durables.Channel,
) -> None:
    """Two busy consumers taking turns at a backlog: each fetch deals to the caller alone,
    through its tap. Keeping the tap open, the door closed and the ring turned one step
    costs a call each, not a delete and a rewrite (five calls more per fetch before)."""
    redis = channel.ctx.executor.redis
    if not isinstance(redis, Redis):
        pytest.skip("the server's command counts are per node on a cluster")
    dur = channel.durable("work", kind="shared")
    publish(channel, 1000)
    with (
        dur.consumer("one", prefetch=50, auto_ack=True) as one,
        dur.consumer("two", prefetch=50, auto_ack=True) as two,
    ):
        got = [e.id for _ in range(2) for c in (one, two) for e in c.fetch(timeout=2)]
        before = {name: command_calls(redis, name) for name in ("del", "rpush", "lmove")}
        for _ in range(6):
            got += [e.id for c in (one, two) for e in c.fetch(timeout=2)]
        after = {name: command_calls(redis, name) - before[name] for name in before}
    assert len(got) == len(set(got)) == 800
    assert after["del"] == 0 and after["rpush"] == 0
    assert after["lmove"] == 12  # the ring turned past the caller at each fetch


def test_window_caps_what_a_consumer_holds_and_ack_makes_room(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared")
    publish(channel, 10)
    with dur.consumer("one", prefetch=3) as one:
        got = one.fetch(timeout=1)
        assert texts(got) == ["e1", "e2", "e3"]
        assert one.fetch(timeout=0.3) == []  # window full: nothing more
        assert dur.depth() == 7 and dur.transaction_depth() == 3
        got[0].ack()
        assert texts(one.fetch(timeout=1)) == ["e4"]
        one.commit()
        assert texts(one.fetch(timeout=1)) == ["e5", "e6", "e7"]
        assert dur.depth() == 3 and dur.transaction_depth() == 3


def test_a_window_means_no_auto_ack_and_none_means_auto_ack(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared")
    publish(channel, 2)
    with dur.consumer("one", prefetch=5) as c:
        assert c.auto_ack is False
        fetch_all(c, 2)
    assert dur.transaction_depth() == 0 and dur.depth() == 2  # handed back on close
    with dur.consumer("two") as c:
        assert c.auto_ack is True
        fetch_all(c, 2)
    assert dur.transaction_depth() == 0 and dur.depth() == 0


def test_window_arguments_are_checked(channel: durables.Channel, client: durables.Client) -> None:
    dur = channel.durable("work", kind="shared")
    for bad in (0, -1, True, "4"):
        with pytest.raises(InvalidWindowError):
            dur.consumer(prefetch=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidWindowError):
        dur.subscribe(lambda e: None, window=0)
    sub = dur.subscribe(lambda e: None, window=-1)  # negative: the default window
    try:
        assert sub.consumer.reader.window == client.settings.client_queue_window  # type: ignore[attr-defined]
        assert sub.consumer.auto_ack is False
    finally:
        sub.close()


def test_shared_rollback_redelivers_at_once_with_count_and_flag(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("work", kind="shared")
    publish(channel, 3)
    with dur.consumer("one", prefetch=3) as c:
        got = c.fetch(timeout=1)
        got[1].rollback()
        again = c.fetch(timeout=1)
        assert [(e.text, e.redelivered, e.redelivery_count) for e in again] == [("e2", True, 1)]
        again[0].rollback()
        third = c.fetch(timeout=1)
        assert [(e.text, e.redelivery_count) for e in third] == [("e2", 2)]
        assert dur.depth() == 0 and dur.transaction_depth() == 3
        c.commit()  # e1, e3 and the redelivered e2
    assert dur.depth() == 0 and dur.transaction_depth() == 0


def test_unacknowledged_events_come_back_marked_after_a_clean_close(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("work", kind="shared")
    publish(channel, 3)
    with dur.consumer("one", prefetch=2) as c:
        assert texts(c.fetch(timeout=1)) == ["e1", "e2"]  # handed out, never acked
    with dur.consumer("two", prefetch=5) as c:
        back = c.fetch(timeout=1)
        assert [(e.text, e.redelivery_count) for e in back] == [("e1", 1), ("e2", 1), ("e3", 0)]


def test_rolled_back_event_is_first_in_line_for_any_consumer(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared")
    one = dur.consumer("one", prefetch=1)
    with dur.consumer("two", prefetch=1) as two:
        with one:
            publish(channel, 3)
            (a,) = one.fetch(timeout=1)
            (b,) = two.fetch(timeout=1)
            assert (a.text, b.text) == ("e1", "e2")
            a.rollback()
        b.ack()
        (c,) = two.fetch(timeout=1)  # e1 goes before e3, to whoever has room
        assert (c.text, c.redelivered) == ("e1", True)


def test_delayed_rollback_is_honoured(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared")
    publish(channel, 1)
    with dur.consumer("one", prefetch=2) as c:
        (event,) = c.fetch(timeout=1)
        rolled = time.monotonic()
        event.rollback(delay=0.6)
        (again,) = fetch_all(c, 1, timeout=3)  # not before the delay, however long fetches take
        assert time.monotonic() - rolled >= 0.6
        assert again.text == "e1" and again.redelivery_count == 1
        with pytest.raises(ConfigError):
            again.rollback(delay=-1)


def test_events_go_to_the_dead_letters_after_max_deliveries(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared", max_deliveries=3)
    publish(channel, 2)
    with dur.consumer("one", prefetch=5) as c:
        deliveries = 0
        for _ in range(10):
            got = [e for e in c.fetch(timeout=0.5) if e.text == "e1"]
            if not got:
                break
            deliveries += 1
            got[0].rollback()
        c.commit()
    assert deliveries == 3
    dead = dur.dead_letters()
    assert [(d.text, d.origin_id, d.reason, d.deliveries) for d in dead] == [
        ("e1", dead[0].origin_id, "max_deliveries", 3)
    ]
    assert dur.depth() == 0 and dur.transaction_depth() == 0
    assert dur.replay_dead_letters() == 1
    with dur.consumer("two") as c:
        (again,) = fetch_all(c, 1)
    assert again.text == "e1" and not again.redelivered
    assert dur.dead_letters() == []


CRASHER = textwrap.dedent(
    """
    import sys, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=1.0)
    dur = client.channel("orders").durable("work", kind="shared")
    c = dur.consumer("doomed", prefetch=5)
    got = []
    while len(got) < 5:
        got += c.fetch(timeout=1)
    print(" ".join(e.text for e in got), flush=True)
    sys.stdin.read()
    """
)


def crash_holding_a_window(
    server_url: str, namespace: str, channel: durables.Channel, events: int
) -> list[str]:
    """Run a consumer process that takes a window of 5 events, then kill -9 it;
    returns the events it held."""
    with python_child(CRASHER, server_url, namespace) as proc:
        publish(channel, events)
        held = first_line(proc).split()
        os.kill(proc.pid, signal.SIGKILL)
    return held


def test_consumer_killed_with_kill9_while_holding_its_window_loses_nothing(
    server_url: str, namespace: str, channel: durables.Channel
) -> None:
    dur = channel.durable("work", kind="shared")
    held = crash_holding_a_window(server_url, namespace, channel, 20)
    assert len(held) == 5
    seen: dict[str, int] = {}
    with dur.consumer("survivor", prefetch=50) as c:
        deadline = time.monotonic() + 10
        while len(seen) < 20 and time.monotonic() < deadline:
            for event in c.fetch(timeout=0.3):
                seen[event.text] = event.redelivery_count
                event.ack()
    assert sorted(seen) == sorted(f"e{i}" for i in range(1, 21))
    assert {t for t, count in seen.items() if count == 1} == set(held)
    assert dur.depth() == 0 and dur.transaction_depth() == 0


PAUSED = textwrap.dedent(
    """
    import sys, time, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=1.0,
                              block_s=0.2)
    dur = client.channel("orders").durable("work", kind=sys.argv[3])
    with dur.consumer("paused", prefetch=5) as c:
        held = []
        while len(held) < 5:
            held += c.fetch(timeout=1)
        print(" ".join(e.text for e in held), flush=True)
        sys.stdin.readline()  # stopped here (SIGSTOP) past its lease, then told to go on
        for event in held:
            event.ack()  # late: its events went to the other consumer meanwhile
        print("acked", flush=True)
        got, deadline = [], time.monotonic() + 15
        while len(got) < int(sys.argv[4]) and time.monotonic() < deadline:
            for event in c.fetch(timeout=0.5):
                got.append(f"{event.text}:{event.redelivery_count}")
                event.ack()
        print(" ".join(got), flush=True)
    """
)


@pytest.mark.parametrize("kind", ["shared", "serial"])
def test_a_consumer_paused_past_its_lease_loses_nothing_and_takes_events_again_after(
    server_url: str, namespace: str, channel: durables.Channel, kind: durables.Kind
) -> None:
    """A consumer process stopped (SIGSTOP) while it holds its window: the other consumer
    gets those events, flagged, once the lease lapses; resumed, the stopped one acknowledges
    late without harm and joins again. Counted: published, delivered, lost, duplicated."""
    dur = channel.durable("work", kind=kind)
    after = 5  # published once the stopped consumer is back and alone
    with python_child(PAUSED, server_url, namespace, kind, str(after)) as proc:
        publish(channel, 10)
        held = first_line(proc).split()
        assert held == [f"e{i}" for i in range(1, 6)]
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            survivor: list[durables.Event] = []
            with dur.consumer("survivor", prefetch=50) as c:
                deadline = time.monotonic() + 10
                while len(survivor) < 10 and time.monotonic() < deadline:
                    for event in c.fetch(timeout=0.3):
                        survivor.append(event)
                        event.ack()
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert first_line(proc) == "acked"
        publish(channel, after, start=11)
        resumed = first_line(proc).split()
    published = [f"e{i}" for i in range(1, 11 + after)]
    seen = [e.text for e in survivor]
    # the survivor: all ten, nothing twice; the stopped one's five flagged as redelivered
    assert sorted(seen, key=lambda t: int(t[1:])) == published[:10]
    assert {e.text for e in survivor if e.redelivered} == set(held)
    if kind == "serial":  # the line passed whole: its window first, then on in order
        assert seen == published[:10]
    # back and alone, the stopped consumer gets every later event, in order, unflagged
    assert resumed == [f"{t}:0" for t in published[10:]]
    # lost: none; duplicated: only the window held across the pause (delivered to both)
    assert set(seen) | set(held) | {r.split(":")[0] for r in resumed} == set(published)
    assert dur.depth() == 0 and dur.transaction_depth() == 0


def test_durable_filter_on_shared_keeps_non_matching_events_away(
    client: durables.Client, channel: durables.Channel
) -> None:
    dur = channel.durable("eu", kind="shared", filter="region = 'eu' AND qty > 2")
    msgs = [
        durables.Message(f"e{i}", properties={"region": "eu" if i % 2 else "us", "qty": i})
        for i in range(1, 11)
    ]
    channel.publish_many(msgs)
    assert dur.depth() == 4  # e3, e5, e7, e9
    with dur.consumer("one") as c:
        assert texts(fetch_all(c, 4)) == ["e3", "e5", "e7", "e9"]
        assert c.fetch(timeout=0.2) == []
    client.housekeep()
    assert channel.info().length == 0  # non-matching events did not hold back retention


def props_msgs(*regions: str) -> list[durables.Message]:
    return [durables.Message(f"e{i}", properties={"region": r}) for i, r in enumerate(regions, 1)]


def test_a_consumer_takes_only_events_its_own_filter_matches(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared")
    with dur.consumer("eu", prefetch=10, filter="region = 'eu'") as eu:
        channel.publish_many(props_msgs("eu", "us", "eu"))
        assert texts(eu.fetch(timeout=1)) == ["e1", "e3"]
    # the first consumer's filter decided what the durable kept: e2 was dropped
    assert dur.depth() == 2 and dur.transaction_depth() == 0


def test_the_latest_consumer_filter_governs_the_store_and_earlier_ones_are_notified(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("work", kind="shared")
    heard: list[str] = []
    first = dur.consumer(
        "first", prefetch=10, filter="region IN ('eu', 'us')", on_notice=heard.append
    )
    with first:
        with dur.consumer("second", prefetch=10, filter="region = 'us'") as second:
            channel.publish_many(props_msgs("eu", "us", "asia", "us"))
            got_first, got_second = first.fetch(timeout=1), second.fetch(timeout=1)
            # the store keeps only 'us' events now; each consumer still uses its own filter
            assert texts(got_first) + texts(got_second) == ["e2", "e4"]
            assert len(heard) == 1 and "second" in heard[0] and first.notices == heard
            assert second.notices == []
            first.commit()
            second.commit()
        # a third consumer without a filter leaves the second's filter in effect
        with dur.consumer("third", prefetch=10) as third:
            channel.publish_many(props_msgs("eu", "us"))
            got = first.fetch(timeout=1) + third.fetch(timeout=1)
            assert [e.properties["region"] for e in got] == ["us"]


def test_the_store_filter_resets_when_the_last_consumer_leaves(channel: durables.Channel) -> None:
    dur = channel.durable("work", kind="shared")
    with dur.consumer("picky", filter="region = 'eu'"):
        pass
    with dur.consumer("anyone", prefetch=10) as c:
        channel.publish_many(props_msgs("eu", "us"))
        assert texts(c.fetch(timeout=1)) == ["e1", "e2"]


def test_an_exclusive_consumer_filter_skips_what_it_does_not_match(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("audit")
    channel.publish_many(props_msgs("eu", "us", "eu"))
    with dur.consumer(filter="region = 'eu'") as c:
        assert texts(fetch_all(c, 2)) == ["e1", "e3"]
    assert dur.depth() == 0 and dur.transaction_depth() == 0


def test_housekeeping_hands_back_the_events_of_a_dead_consumer_nobody_else_fetches(
    server_url: str, namespace: str, client: durables.Client, channel: durables.Channel
) -> None:
    dur = channel.durable("work", kind="shared")
    assert len(crash_holding_a_window(server_url, namespace, channel, 5)) == 5
    assert dur.transaction_depth() == 5
    time.sleep(1.2)  # the dead consumer's lease lapses
    client.housekeep()
    assert dur.transaction_depth() == 0 and dur.depth() == 5
    assert dur.info().consumers == ()


@pytest.mark.parametrize("kind", ["shared", "serial", "keyed", "exclusive"])
def test_closing_a_consumer_whose_durable_was_deleted_is_quiet(
    channel: durables.Channel, kind: durables.Kind
) -> None:
    """Nothing is left to give back to: closing says nothing (it raised
    DurableNotFoundError on the many-consumer kinds)."""
    consumer = channel.durable("work", kind=kind).consumer("c")
    channel.publish("e1", key="k")
    assert [e.text for e in consumer.fetch(timeout=2)] == ["e1"]
    channel.delete()
    consumer.close()
