"""Exclusive durables: one consumer, order, cumulative ack, rollback, takeover after kill -9."""

from __future__ import annotations

import os
import signal
import textwrap
import threading
import time

import pytest

import durables
from durables import DurableInUseError, InvalidWindowError, LeaseLostError
from durables.keys import ChannelKeys

from .children import first_line, once_free, python_child
from .conftest import FAST, Connect
from .helpers import fetch_all, publish
from .servers import RedisProcess

pytestmark = [pytest.mark.on_cluster, pytest.mark.both_clients]


def test_exclusive_delivers_in_publish_order(channel: durables.Channel) -> None:
    dur = channel.durable("audit")
    ids = publish(channel, 250)
    with dur.consumer() as c:
        got = fetch_all(c, 250)
    assert [e.id for e in got] == ids
    assert [e.text for e in got] == [f"e{i}" for i in range(1, 251)]
    assert dur.depth() == 0 and dur.transaction_depth() == 0


def test_second_consumer_is_rejected_while_the_first_is_attached(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("audit")
    with dur.consumer("first"):
        with pytest.raises(DurableInUseError, match="first@"):
            dur.consumer("second")
        assert dur.info().consumers[0].startswith("first@")
    with dur.consumer("second") as c:  # free again after a clean close
        assert c.fetch(timeout=0) == []


def test_lease_outlives_the_lease_timeout_while_the_holder_is_alive(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("audit")
    with dur.consumer("first"):
        time.sleep(FAST["lease_timeout_s"] * 2.5)  # heartbeats keep it
        with pytest.raises(DurableInUseError):
            dur.consumer("second")


def test_ack_of_an_event_acknowledges_every_event_before_it(channel: durables.Channel) -> None:
    dur = channel.durable("audit")
    publish(channel, 10)
    with dur.consumer(auto_ack=False) as c:
        got = fetch_all(c, 10)
        assert dur.transaction_depth() == 10
        got[6].ack()  # the seventh: acks 1..7
        assert dur.transaction_depth() == 3
        got[2].ack()  # already covered: no-op
        assert dur.transaction_depth() == 3
    with dur.consumer(auto_ack=False) as c:
        again = fetch_all(c, 3)
    assert [e.text for e in again] == ["e8", "e9", "e10"]
    assert all(e.redelivered and e.redelivery_count == 1 for e in again)


def test_auto_ack_acknowledges_at_the_next_fetch_and_at_a_clean_close(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("audit")
    publish(channel, 3)
    with dur.consumer() as c:
        assert len(fetch_all(c, 3)) == 3
        assert dur.transaction_depth() == 3
        publish(channel, 1, start=4)
        assert [e.text for e in c.fetch(timeout=2)] == ["e4"]
        assert dur.transaction_depth() == 1
    assert dur.transaction_depth() == 0


def test_consumer_leaving_with_an_exception_does_not_acknowledge(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("audit")
    publish(channel, 2)
    with pytest.raises(RuntimeError), dur.consumer() as c:
        fetch_all(c, 2)
        raise RuntimeError("processing failed")
    with dur.consumer() as c:
        again = fetch_all(c, 2)
    assert [(e.text, e.redelivered) for e in again] == [("e1", True), ("e2", True)]


def test_rollback_redelivers_after_resubscription_with_count_and_flag_unchanged(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("audit")
    publish(channel, 4)
    with dur.consumer(auto_ack=False) as c:
        got = fetch_all(c, 4)
        got[0].ack()
        got[1].rollback()
        c.commit()  # cannot pass the rolled-back event: e2..e4 stay pending
        assert c.fetch(timeout=0.3) == []  # not redelivered within this subscription
        assert dur.transaction_depth() == 3
    with dur.consumer(auto_ack=False) as c:
        again = fetch_all(c, 3)
        assert [(e.text, e.redelivery_count) for e in again] == [("e2", 0), ("e3", 1), ("e4", 1)]
        assert not again[0].redelivered
        c.rollback()
    with dur.consumer(auto_ack=False) as c:  # rolled back again: still unchanged
        third = fetch_all(c, 3)
        assert [(e.text, e.redelivery_count) for e in third] == [("e2", 0), ("e3", 1), ("e4", 1)]
        third[-1].ack()
    assert dur.transaction_depth() == 0 and dur.depth() == 0


@pytest.mark.parametrize("prefetch", [4, 1, 0, -1])
def test_prefetch_on_an_exclusive_durable_is_rejected(
    channel: durables.Channel, prefetch: int
) -> None:
    dur = channel.durable("audit")
    with pytest.raises(InvalidWindowError, match="exclusive"):
        dur.consumer(prefetch=prefetch)
    assert dur.info().consumers == ()  # nothing attached


def test_window_on_an_exclusive_subscription_is_rejected(channel: durables.Channel) -> None:
    dur = channel.durable("audit")
    with pytest.raises(InvalidWindowError):
        dur.subscribe(lambda e: None, window=4)
    with pytest.raises(ValueError):  # InvalidWindowError is a ValueError
        dur.subscribe(lambda e: None, window=-1)


def test_subscribe_delivers_in_order_and_auto_acks(channel: durables.Channel) -> None:
    dur = channel.durable("audit")
    seen: list[str] = []
    done = threading.Event()

    def listener(event: durables.Event) -> None:
        seen.append(event.text)
        if len(seen) == 50:
            done.set()

    with dur.subscribe(listener):
        publish(channel, 50)
        assert done.wait(10)
    assert seen == [f"e{i}" for i in range(1, 51)]
    assert dur.transaction_depth() == 0


def test_listener_failure_rolls_back_and_ends_the_exclusive_subscription(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("audit")
    publish(channel, 5)
    seen: list[str] = []

    def listener(event: durables.Event) -> None:
        seen.append(event.text)
        if event.text == "e3":
            raise ValueError("cannot handle e3")

    sub = dur.subscribe(listener)
    assert sub.wait(10)
    assert isinstance(sub.error, ValueError)
    assert seen == ["e1", "e2", "e3"]
    with dur.consumer() as c:
        again = fetch_all(c, 3)
    # e3 was rolled back (count unchanged), e4 and e5 were never handed out
    assert [(e.text, e.redelivery_count) for e in again] == [("e3", 0), ("e4", 0), ("e5", 0)]


HOLDER = textwrap.dedent(
    """
    import sys, time, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=1.0)
    dur = client.channel("orders").durable("audit")
    c = dur.consumer("doomed", auto_ack=False)
    got = []
    while len(got) < 5:
        got += c.fetch(timeout=1)
    print(" ".join(e.text for e in got), flush=True)
    time.sleep(60)
    """
)


def test_holder_killed_with_kill9_loses_its_lease_and_the_next_consumer_gets_its_events(
    server_url: str, namespace: str, channel: durables.Channel
) -> None:
    dur = channel.durable("audit")
    publish(channel, 5)
    with python_child(HOLDER, server_url, namespace) as proc:
        assert first_line(proc).split() == ["e1", "e2", "e3", "e4", "e5"]
        with pytest.raises(DurableInUseError, match="doomed@"):
            dur.consumer("heir")
        os.kill(proc.pid, signal.SIGKILL)
    publish(channel, 2, start=6)
    heir = once_free(lambda: dur.consumer("heir"), DurableInUseError)
    with heir:
        got = fetch_all(heir, 7)
    assert [e.text for e in got] == [f"e{i}" for i in range(1, 8)]
    assert [e.redelivery_count for e in got] == [1] * 5 + [0, 0]
    assert dur.transaction_depth() == 0


PAUSED_HOLDER = textwrap.dedent(
    """
    import sys, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=1.0,
                              block_s=0.2)
    dur = client.channel("orders").durable("audit")
    with dur.consumer("paused") as c:
        print("attached", flush=True)
        try:
            while True:
                for event in c.fetch(timeout=0.5):
                    print(event.text, flush=True)
        except durables.DurableInUseError as exc:
            print("lost:", type(exc).__name__, flush=True)
    """
)


def test_a_holder_paused_past_its_lease_reads_nothing_after_a_new_holder_took_over(
    server: RedisProcess, namespace: str
) -> None:
    # The heir keeps a long lease, so a loaded machine cannot make it lapse meanwhile (the
    # paused holder would then rightly take the durable back); the paused one has 1 s.
    heirs = durables.connect(server.url, namespace=namespace, **{**FAST, "lease_timeout_s": 10})
    channel = heirs.channel("orders")
    dur = channel.durable("audit")
    with heirs, python_child(PAUSED_HOLDER, server.url, namespace) as proc:
        assert first_line(proc) == "attached"
        publish(channel, 2)
        assert [first_line(proc), first_line(proc)] == ["e1", "e2"]
        os.kill(proc.pid, signal.SIGSTOP)  # paused, as by a long GC pause
        heir = once_free(lambda: dur.consumer("heir"), DurableInUseError)
        publish(channel, 3, start=3)
        with heir:
            got = fetch_all(heir, 3, timeout=15)
            os.kill(proc.pid, signal.SIGCONT)
            publish(channel, 2, start=6)
            got += fetch_all(heir, 2, timeout=15)
            assert first_line(proc) == "lost: LeaseLostError"  # and not e3..e7
        # e1, e2 may not have been acknowledged before the pause: then they come first,
        # flagged; then everything after, in order; the paused holder read none of it
        again = [e for e in got if e.text in ("e1", "e2")]
        assert all(e.redelivered for e in again)
        assert [e.text for e in got if e not in again] == ["e3", "e4", "e5", "e6", "e7"]
        assert [e.text for e in got] == sorted((e.text for e in got), key=lambda t: int(t[1:]))


def _steal(server: RedisProcess, namespace: str, dur: durables.Durable) -> durables.Consumer:
    """Another holder takes the durable while the first still believes in its lease, as
    after a pause that began just after the first one checked it locally."""
    lease = ChannelKeys(namespace, "orders").lease("audit")
    with server.client() as raw:
        raw.delete(lease)
    return dur.consumer("heir")


@pytest.mark.parametrize("blocked", [False, True], ids=["reading", "waiting"])
def test_a_holder_whose_lease_was_taken_reads_nothing_the_new_holder_should_get(
    server: RedisProcess, namespace: str, blocked: bool, connect: Connect
) -> None:
    # Long leases: the first holder's local view stays fresh and no heartbeat notices
    # the theft before its next read; only the server can stop that read.
    settings = {**FAST, "lease_timeout_s": 30.0}
    with connect(server.url, namespace=namespace, **settings) as client:
        channel = client.channel("orders")
        dur = channel.durable("audit")
        first = dur.consumer("first")
        assert first.fetch(timeout=0) == []  # past its inheritance: reading new events
        outcome: list[object] = []
        if blocked:  # the first holder sits in its wait for new events meanwhile
            reader = threading.Thread(target=lambda: outcome.append(_fetch(first, 5.0)))
            reader.start()
            time.sleep(0.3)
        heir = _steal(server, namespace, dur)
        publish(channel, 3)
        if blocked:
            reader.join(10)
        else:
            outcome.append(_fetch(first, 0))
        with heir:
            got = fetch_all(heir, 3)
        assert [e.text for e in got] == ["e1", "e2", "e3"]
        assert outcome == ["LeaseLostError"]  # and no event
        first.close()


def _fetch(consumer: durables.Consumer, timeout: float) -> object:
    try:
        return [e.text for e in consumer.fetch(timeout=timeout)]
    except LeaseLostError as exc:
        return type(exc).__name__


def test_max_deliveries_on_an_exclusive_durable_is_refused_not_ignored(
    channel: durables.Channel,
) -> None:
    with pytest.raises(durables.ConfigError, match="shared and serial"):
        channel.durable("audit", max_deliveries=3)
    assert channel.durable_names() == []  # nothing stored
