"""Restarting after a crash: an exclusive consumer or a session waits (`wait=`) for a dead
holder's lease to lapse instead of failing, and the in-use errors say how long it has left
and what to call, without the server's raw reply chained into the traceback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter

import pytest

import durables
from durables import ConfigError, DurableInUseError, SessionInUseError
from durables.server import processes

from .children import first_line, python_child
from .conftest import FAST

pytestmark = [pytest.mark.both_clients]

LEASE_S = FAST["lease_timeout_s"]


def test_a_second_consumer_is_told_the_lease_left_and_the_wait_option_with_no_raw_reply(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("audit")
    with dur.consumer("first"), pytest.raises(DurableInUseError) as caught:
        dur.consumer("second")
    err = caught.value
    assert err.holder.startswith("first@")
    assert err.lease_left_s is not None and 0 < err.lease_left_s <= LEASE_S
    assert "s left" in str(err) and "wait=" in str(err) and "get_durable(" in str(err)
    assert err.__cause__ is None and err.__suppress_context__


def test_a_consumer_that_waits_gives_up_after_its_wait_while_the_holder_lives(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("audit")
    with dur.consumer("first"):
        started = time.monotonic()
        with pytest.raises(DurableInUseError, match="first@"):
            dur.consumer("second", wait=LEASE_S * 1.5)
        assert time.monotonic() - started >= LEASE_S * 1.5 - 0.05


def test_a_consumer_that_waits_attaches_as_soon_as_the_holder_lets_go(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("audit")
    first = dur.consumer("first")
    closer = threading.Timer(0.3, first.close)
    closer.start()
    started = time.monotonic()
    with dur.consumer("standby", wait=True) as c:
        assert time.monotonic() - started < LEASE_S + 1
        assert dur.info().consumers[0].startswith("standby@")
        assert c.fetch(timeout=0) == []
    closer.join()


@pytest.mark.parametrize("wait", [-1, "soon", float("nan")])
def test_a_wait_that_is_not_seconds_or_a_bool_is_refused(
    channel: durables.Channel, wait: object
) -> None:
    with pytest.raises(ConfigError, match="wait must be"):
        channel.durable("audit").consumer(wait=wait)  # type: ignore[arg-type]


def test_a_session_live_elsewhere_says_the_lease_left_and_waits_when_asked(
    client: durables.Client,
) -> None:
    first = client.session("mobile-42", timeout=30)
    with pytest.raises(SessionInUseError) as caught:
        client.session("mobile-42", timeout=30)
    err = caught.value
    assert err.lease_left_s is not None and 0 < err.lease_left_s <= LEASE_S
    assert "s left" in str(err) and "wait=" in str(err)
    assert err.__cause__ is None and err.__suppress_context__
    closer = threading.Timer(0.3, first.close)  # close(): the live lease is released
    closer.start()
    second = client.session("mobile-42", timeout=30, wait=LEASE_S + 1)
    closer.join()
    assert second.state == "connected"
    second.close()


WORKER = textwrap.dedent(
    """
    import sys, time, durables
    url, namespace, wait, stall = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    client = durables.connect(url, namespace=namespace, lease_timeout_s=1.0, block_s=0.2)
    dur = client.channel("orders").durable("audit")
    print("waiting", time.monotonic(), flush=True)
    with dur.consumer("worker", wait=wait) as c:
        print("attached", flush=True)
        while True:
            for event in c.fetch(timeout=0.2):
                print("got", event.text, event.redelivered, flush=True)
                if event.text == stall:
                    time.sleep(60)  # stuck on this event: the supervisor's kill -9 comes
                event.ack()
                print("acked", event.text, flush=True)
    """
)


def _lines_until(proc: subprocess.Popen[str], last: str) -> list[str]:
    assert proc.stdout is not None
    watchdog = threading.Timer(60, proc.kill)  # a hung worker fails the test, not the run
    watchdog.start()
    lines: list[str] = []
    try:
        while not lines or lines[-1] != last:
            line = proc.stdout.readline()
            assert line, f"the worker ended before {last!r}: {lines}"
            lines.append(line.rstrip("\n"))
    finally:
        watchdog.cancel()
    return lines


def test_a_supervised_restart_after_kill9_waits_out_the_lease_and_no_event_reaches_two_holders(
    server_url: str, namespace: str, channel: durables.Channel, client_kind: str
) -> None:
    if client_kind == "aio":
        pytest.skip("the worker process uses the sync client; the aio waits are tested above")
    channel.durable("audit")
    total = 60
    for i in range(1, total + 1):
        channel.publish(f"e{i}".encode())
    args = (server_url, namespace, str(LEASE_S + 1))
    with python_child(WORKER, *args, "e20") as first:
        seen_first = _lines_until(first, "got e20 False")
        os.kill(first.pid, signal.SIGKILL)  # stuck mid-event: e20 is not acknowledged
        first.wait()
        crashed_at = time.monotonic()
        assert first.stdout is not None
        seen_first += first.stdout.read().splitlines()
    # the supervisor starts the worker again at once; with wait= it does not crash-loop
    with python_child(WORKER, *args, "none") as second:
        waiting, attached = _lines_until(second, "attached")
        attached_at = time.monotonic()
        assert waiting.startswith("waiting ") and attached == "attached"
        seen_second = _lines_until(second, f"acked e{total}")
        assert second.poll() is None  # still running: it raised nothing
    # it attaches within a second of the lease lapsing, or of asking when it asked later (a
    # Python starting on a machine busy with other tests can take longer than the lease)
    asked_at = float(waiting.removeprefix("waiting "))  # CLOCK_MONOTONIC: one for all processes
    assert attached_at - max(crashed_at + LEASE_S, asked_at) < 1
    holders = [
        [line.split() for line in seen if line.split()[0] not in ("waiting", "attached")]
        for seen in (seen_first, seen_second)
    ]
    acked = Counter(text for holder in holders for word, text, *_ in holder if word == "acked")
    assert sorted(acked) == sorted(f"e{i}" for i in range(1, total + 1))
    assert set(acked.values()) == {1}  # each event acknowledged by exactly one holder
    first_acked = {text for word, text, *_ in holders[0] if word == "acked"}
    second_got = [(text, again) for word, text, *again in holders[1] if word == "got"]
    assert not first_acked & {text for text, _ in second_got}  # nothing acked is handed on
    assert second_got[0] == ("e20", ["True"])  # the one in flight, flagged
    assert [text for text, _ in second_got] == [f"e{i}" for i in range(20, total + 1)]


SLOW_LEASE_HOLDER = textwrap.dedent(
    """
    import sys, time, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=10.0,
                              block_s=0.2)
    with client.channel("orders").durable("audit").consumer("doomed", auto_ack=False) as c:
        got = []
        while len(got) < 5:
            got += c.fetch(timeout=1.0)
        print(" ".join(e.text for e in got), flush=True)
        time.sleep(60)
    """
)


def test_a_holder_whose_process_is_gone_from_this_host_is_replaced_before_its_lease_lapses(
    server_url: str, namespace: str, channel: durables.Channel
) -> None:
    dur = channel.durable("audit")
    for i in range(1, 6):
        channel.publish(f"e{i}".encode())
    with python_child(SLOW_LEASE_HOLDER, server_url, namespace) as proc:
        assert first_line(proc).split() == ["e1", "e2", "e3", "e4", "e5"]
        with pytest.raises(DurableInUseError, match="doomed@") as caught:
            dur.consumer("heir")  # no wait: refused, the process lives
        assert caught.value.lease_left_s is not None and caught.value.lease_left_s > 5
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()  # reaped, as a supervisor does (a zombie counts as gone too)
    started = time.monotonic()
    with dur.consumer("heir", wait=True) as heir:  # the lease has about 10 s left
        assert time.monotonic() - started < 3
        events = heir.fetch(timeout=2)
    assert [e.text for e in events] == ["e1", "e2", "e3", "e4", "e5"]
    assert all(e.redelivered for e in events)


def test_only_a_holder_gone_from_this_host_boot_and_pid_namespace_counts_as_dead() -> None:
    from durables.readers.exclusive.reader import holder_gone
    from durables.server.processes import pid_scope

    host, scope = socket.gethostname(), pid_scope()
    with subprocess.Popen([sys.executable, "-c", "pass"]) as done:
        done.wait()
    dead = done.pid  # reaped: no such process now (unless the pid was reused: alive, wait)
    assert holder_gone(f"w@{host}:{dead}:0badf00d:{scope}") is not processes.pid_alive(dead)
    assert not holder_gone(f"w@{host}:{os.getpid()}:0badf00d:{scope}")  # alive
    assert not holder_gone(f"w@other-host:{dead}:0badf00d:{scope}")  # pids of another host
    assert not holder_gone(f"w@{host}:{dead}:0badf00d:12345678")  # another container or boot
    assert not holder_gone(f"w@{host}:{dead}:0badf00d:")  # no /proc where it ran
    assert not holder_gone(f"w@{host}:{dead}:0badf00d")  # a token of an older version
