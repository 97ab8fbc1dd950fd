"""A serial holder reads ahead inside its window: with a window of 16 or more, each fetch
brings at most half of it, and the next read goes out before the application handles the
events, so the server reads while the client works. What it read ahead is held, not
handed out: it goes back uncounted at close, comes after a rolled-back event, and is not
handed out by a holder whose lease passed while it waited (a pause, an outage)."""

from __future__ import annotations

import os
import signal
import textwrap
import threading
import time
from functools import partial

import pytest

import durables
from durables.readers.shared.handout import READ_AHEAD_WINDOW

from .children import Lines, python_child
from .conftest import FAST
from .faultproxy import FaultProxy
from .helpers import Line, command_calls, fetch_all, texts, wait_for
from .servers import RedisProcess

WINDOW = 20
HALF = WINDOW // 2


def publish(channel: durables.Channel, n: int, start: int = 1) -> list[str]:
    """Publish `e<start>` .. `e<start + n - 1>` in one batch; their texts."""
    sent = [f"e{i}" for i in range(start, start + n)]
    channel.publish_many([durables.Message(text) for text in sent])
    return sent


@pytest.mark.on_cluster
@pytest.mark.both_clients
def test_a_serial_holder_reads_its_next_batch_while_the_application_works(
    channel: durables.Channel,
) -> None:
    """The first fetch brings half the window and the next half is read at once, before
    the application fetches again; draining brings every event once, in publish order."""
    assert WINDOW >= READ_AHEAD_WINDOW
    dur = channel.durable("line", kind="serial")
    sent = publish(channel, 95)
    with dur.consumer("one", prefetch=WINDOW, auto_ack=True) as one:
        first = one.fetch(timeout=2)
        assert texts(first) == sent[:HALF]
        # read ahead: the next half is this consumer's already (held, not handed out)
        assert wait_for(lambda: dur.transaction_depth() == WINDOW, timeout=5)
        rest = fetch_all(one, len(sent) - HALF)
        assert all(len(batch) <= HALF for batch in [first, rest[:HALF]])
        got = texts(first) + texts(rest)
        assert got == sent  # nothing lost, nothing twice, nothing reordered
        assert not any(e.redelivered for e in rest)
        assert one.fetch(timeout=0.3) == []
    assert dur.depth() == 0 and dur.transaction_depth() == 0


@pytest.mark.on_cluster
@pytest.mark.both_clients
def test_a_small_serial_window_is_taken_whole(channel: durables.Channel) -> None:
    """A window below READ_AHEAD_WINDOW is how many events the application takes at a
    time: a fetch brings all of it, and nothing is read ahead."""
    dur = channel.durable("line", kind="serial")
    sent = publish(channel, 2 * READ_AHEAD_WINDOW)
    small = READ_AHEAD_WINDOW - 1
    with dur.consumer("one", prefetch=small) as one:
        assert texts(one.fetch(timeout=2)) == sent[:small]
        time.sleep(0.2)
        assert dur.transaction_depth() == small
        one.commit()


@pytest.mark.on_cluster
@pytest.mark.both_clients
def test_what_was_read_ahead_goes_back_uncounted_at_close(channel: durables.Channel) -> None:
    """Closing without acknowledging: the events handed out come again flagged, those only
    read ahead come again unflagged (the application never saw them), in order."""
    dur = channel.durable("line", kind="serial")
    sent = publish(channel, WINDOW)
    with dur.consumer("one", prefetch=WINDOW) as one:
        handed = one.fetch(timeout=2)
        assert texts(handed) == sent[:HALF]
        assert wait_for(lambda: dur.transaction_depth() == WINDOW, timeout=5)
    with dur.consumer("two", prefetch=WINDOW) as two:
        again = fetch_all(two, WINDOW)
        assert texts(again) == sent
        assert [e.redelivered for e in again] == [True] * HALF + [False] * HALF
        two.commit()
    assert dur.depth() == 0


@pytest.mark.on_cluster
@pytest.mark.both_clients
def test_a_rolled_back_event_comes_before_what_was_read_ahead(channel: durables.Channel) -> None:
    """Serial order holds through a rollback: the event handed back comes first, flagged,
    then the events read ahead while it was out, in order."""
    dur = channel.durable("line", kind="serial")
    sent = publish(channel, 30)
    with dur.consumer("one", prefetch=WINDOW) as one:
        first = one.fetch(timeout=2)
        assert texts(first) == sent[:HALF]
        assert wait_for(lambda: dur.transaction_depth() == WINDOW, timeout=5)
        for event in first[1:]:
            event.ack()
        first[0].rollback()
        rest: list[durables.Event] = []
        deadline = time.monotonic() + 10
        while len(rest) < 1 + len(sent) - HALF and time.monotonic() < deadline:
            rest += one.fetch(timeout=0.5)
            one.commit()
    assert texts(rest) == [sent[0], *sent[HALF:]]
    assert rest[0].redelivered and not any(e.redelivered for e in rest[1:])


PAUSED = textwrap.dedent(
    """
    import sys, time, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=0.5,
                              block_s=0.2, housekeep_interval_s=3600)
    dur = client.channel("orders").durable("line", kind="serial")
    with dur.consumer("holder", prefetch=int(sys.argv[3]), auto_ack=True) as c:
        print("attached", flush=True)
        while True:
            try:
                events = c.fetch(timeout=5)
            except durables.DurablesError as exc:
                print("error", type(exc).__name__, flush=True)
                continue
            for event in events:
                print("got", event.text, event.redelivered, flush=True)
            if events:
                print("working", flush=True)
                time.sleep(1.0)  # the application works: the read ahead is out
    """
)


def _has(line: str, lines: list[str]) -> bool:
    return line in lines


def test_a_holder_paused_past_its_lease_never_hands_out_what_it_read_ahead(
    server: RedisProcess, namespace: str
) -> None:
    """The holder's read ahead is answered, then it is stopped while its application works
    (SIGSTOP) past its lease; another consumer takes the line and holds those events. The
    holder resumes: it must not hand them out (two holders of a serial line), and gets
    them back only after the other consumer let go, in order."""
    with (
        durables.connect(server.url, namespace=namespace, **FAST) as client,
        python_child(PAUSED, server.url, namespace, str(WINDOW)) as proc,
    ):
        channel = client.channel("orders")
        dur = channel.durable("line", kind="serial")
        lines = Lines(proc)
        lines.until(partial(_has, "attached"), 20)
        sent = publish(channel, WINDOW + 5)
        lines.until(partial(_has, "working"), 20)
        assert wait_for(lambda: dur.transaction_depth() == WINDOW, timeout=5)  # read ahead
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            time.sleep(1.5)  # past the holder's lease
            with dur.consumer("heir", prefetch=WINDOW) as heir:
                # what the holder held: its batch (not acknowledged yet: auto-ack goes
                # with its next fetch) and its read ahead, reaped back
                held = fetch_all(heir, WINDOW)
                os.kill(proc.pid, signal.SIGCONT)
                time.sleep(2.0)  # the holder's application is back at fetch()
                paused = [ln for ln in lines.seen if ln.startswith("got ")]
                assert texts(held) == sent[:WINDOW]
                assert all(e.redelivered for e in held[:HALF])  # handed out before
                # the paused holder handed out only its first batch: none of the heir's
                assert [ln.split()[1] for ln in paused] == sent[:HALF]
                heir.commit()
            lines.until(partial(_has, f"got {sent[-1]} False"), 20)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
    got = [ln.split()[1] for ln in lines.seen if ln.startswith("got ")]
    print(f"holder got {len(got)}, heir got {len(held)} of {len(sent)}")
    assert got == sent[:HALF] + sent[WINDOW:]


@pytest.mark.parametrize("fault", ["reset", "blackhole"])
def test_a_read_ahead_lost_in_a_network_fault_comes_again_in_order(
    server: RedisProcess, namespace: str, fault: str
) -> None:
    """The connection a read ahead waits on is reset, or black-holed for a second, while
    the application works: the next fetch rides through, and every event comes once, in
    order; none is lost. Counted over rounds."""
    rounds, per_round = 5, 25
    settings = {
        **FAST,
        "lease_timeout_s": 5.0,
        "socket_timeout_s": 0.5,
        "reconnect_timeout_s": 30.0,
    }
    sent: list[str] = []
    got: list[durables.Event] = []
    with (
        FaultProxy(server.port) as proxy,
        durables.connect(server.url, namespace=namespace, **FAST) as producer,
        durables.connect(proxy.url, namespace=namespace, **settings) as client,
    ):
        producer.channel("orders").durable("line", kind="serial")
        dur = client.channel("orders").durable("line", kind="serial")
        with dur.consumer("one", prefetch=WINDOW, auto_ack=True) as one:
            for n in range(rounds):
                sent += publish(producer.channel("orders"), per_round, start=len(sent) + 1)
                got += one.fetch(timeout=5)  # a batch; its read ahead goes out
                if fault == "reset":
                    proxy.reset_all()
                else:
                    proxy.blackhole()
                    threading.Timer(1.0, proxy.blackhole, (False,)).start()
                got += fetch_all(one, len(sent) - len(got), timeout=20)
                assert len(got) >= len(sent), f"round {n}"
    ids = [e.text for e in got]
    duplicated = len(ids) - len(set(ids))
    unflagged = [e.text for e in got if ids.count(e.text) > 1 and not e.redelivered]
    lost = sorted(set(sent) - set(ids), key=sent.index)
    firsts = sorted(set(ids), key=ids.index)
    print(f"sent {len(sent)}, delivered {len(ids)}, lost {len(lost)}, duplicated {duplicated}")
    assert lost == []
    assert firsts == sent  # first deliveries in publish order
    assert duplicated == 0 and unflagged == []


def test_a_holder_with_no_backlog_does_not_read_ahead(server: RedisProcess, namespace: str) -> None:
    """Events that come one at a time find the holder blocked in its read: a read ahead
    would be a round trip that brings nothing, so none goes out (one read per event)."""
    with (
        durables.connect(server.url, namespace=namespace, **FAST) as client,
        server.client() as raw,
    ):
        channel = client.channel("orders")
        dur = channel.durable("line", kind="serial")
        with dur.consumer("one", prefetch=WINDOW, auto_ack=True) as one:
            publish(channel, 1)
            assert len(one.fetch(timeout=2)) == 1  # the tap is open from here on
            before = command_calls(raw, "xreadgroup")
            trickled = 20
            for n in range(trickled):
                sent = publish(channel, 1, start=n + 2)
                assert texts(one.fetch(timeout=2)) == sent
            reads = command_calls(raw, "xreadgroup") - before
    print(f"{trickled} events one at a time: {reads} reads")
    assert reads <= trickled + 2


@pytest.mark.on_cluster
@pytest.mark.both_clients
def test_serial_subscribers_reading_ahead_process_in_publish_order_one_at_a_time(
    channel: durables.Channel,
) -> None:
    """Three subscribers with windows that read ahead, each listener taking a little time:
    every event processed once, in publish order, and never by two subscribers at once."""
    dur = channel.durable("line", kind="serial")
    line = Line(lambda: 0.0005)
    subs = [dur.subscribe(line.listener(n), window=WINDOW, name=n) for n in ("a", "b", "c")]
    try:
        sent = publish(channel, 300)
        assert wait_for(lambda: len(line.processed) >= len(sent), timeout=30)
    finally:
        for sub in subs:
            sub.close()
    assert line.processed == sent
    assert line.overlaps == []
    assert dur.depth() == 0 and dur.transaction_depth() == 0
