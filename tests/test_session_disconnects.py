"""Durable client sessions through disconnects: a session process killed or stopped
resumes within its timeout with nothing lost, a session away past it starts anew with an
alert, keep-alive and housekeeping, and what a client without its server may still do."""

from __future__ import annotations

import logging
import os
import signal
import textwrap
import time

import pytest

import durables
from durables import SessionInUseError, UnconnectedError

from .children import Lines, first_line, once_free, python_child
from .servers import RedisProcess
from .session_support import Recorder, wait_for

pytestmark = [pytest.mark.on_cluster, pytest.mark.both_clients]


HOLDER = textwrap.dedent(
    """
    import sys, time, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=1.0)
    s = client.session("phone", timeout=30)
    s.register_interest("prices")
    s.ready_for_events()
    print("ready", flush=True)
    time.sleep(60)
    """
)


def test_a_session_killed_with_kill9_resumes_within_its_timeout_with_nothing_lost(
    server_url: str, namespace: str, client: durables.Client, prices: durables.Channel
) -> None:
    with python_child(HOLDER, server_url, namespace) as proc:
        assert first_line(proc) == "ready"
        with pytest.raises(SessionInUseError):
            client.session("phone", timeout=30)
        os.kill(proc.pid, signal.SIGKILL)
    for i in range(20):
        prices.publish(f"p{i}".encode(), key=f"k{i}")
    s = once_free(lambda: client.session("phone", timeout=30), SessionInUseError)
    rec = Recorder()
    with s:
        assert s.resumed
        s.add_listener("prices", rec)
        s.ready_for_events()
        wait_for(rec, 20)
    assert [(t, r) for kind, t, r in rec.log if kind == "event"] == [
        (f"p{i}", True) for i in range(20)
    ]


STOPPED = textwrap.dedent(
    """
    import sys, time, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=1.0,
                              block_s=0.2, housekeep_interval_s=3600)
    s = client.session("phone", timeout=float(sys.argv[3]))
    def say(line):  # one write a line: the delivery and the heartbeat print at once
        sys.stdout.write(line + "\\n")
        sys.stdout.flush()
    s.on_state(lambda old, new: say(f"state {new}"))
    s.register_interest("prices")
    s.add_listener("prices", lambda e: say(f"event {e.text} {int(e.redelivered)}"))
    s.ready_for_events()
    print("ready", flush=True)
    time.sleep(60)
    """
)

STOPPED_AIO = textwrap.dedent(
    """
    import asyncio, sys, durables.aio as aio
    async def main():
        client = await aio.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=1.0,
                                   block_s=0.2, housekeep_interval_s=3600)
        s = await client.session("phone", timeout=float(sys.argv[3]))
        def say(line):  # one write a line
            sys.stdout.write(line + "\\n")
            sys.stdout.flush()
        s.on_state(lambda old, new: say(f"state {new}"))
        await s.register_interest("prices")
        s.add_listener("prices", lambda e: say(f"event {e.text} {int(e.redelivered)}"))
        await s.ready_for_events()
        print("ready", flush=True)
        await asyncio.sleep(60)
    asyncio.run(main())
    """
)


def delivered(lines: list[str]) -> list[str]:
    return [line.split()[1] for line in lines if line.startswith("event")]


@pytest.mark.parametrize("keep_alive", [30.0, 1.0], ids=["within", "past"])
def test_a_session_process_stopped_past_its_lease_goes_on_by_itself(
    server_url: str,
    namespace: str,
    client: durables.Client,
    prices: durables.Channel,
    keep_alive: float,
    client_kind: str,
) -> None:
    """A session's process stopped (SIGSTOP, as by a long pause) for longer than its live
    lease: within the keep-alive it goes on with the same queue, nothing lost; past it (the
    session expired meanwhile, with an alert) it goes on as a new session with the same
    interests, as after an outage past the keep-alive. Either way it is the session's live
    client again, so no other can open it. Counted per phase: published before,
    during and after the stop; delivered, lost, duplicated, reordered."""
    before, during, after = ([f"{phase}{i}" for i in range(1, 4)] for phase in ("p", "q", "r"))
    child = STOPPED_AIO if client_kind == "aio" else STOPPED
    with python_child(child, server_url, namespace, str(keep_alive)) as proc:
        lines = Lines(proc)
        lines.until(lambda seen: "ready" in seen)
        for text in before:
            prices.publish(text.encode())
        lines.until(lambda seen: len(delivered(seen)) == 3)
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            for text in during:
                prices.publish(text.encode())
            time.sleep(2.5)  # past the live lease (1 s), and past a keep-alive of 1 s
            client.housekeep()  # expires the session if its keep-alive passed
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        # live again by itself: the same session, or past the keep-alive a new one
        back = "state expired" if keep_alive < 2.5 else "state connected"
        states = [line for line in lines.until(lambda seen: back in seen) if "state" in line]
        assert states == ["state disconnected", back]
        if keep_alive < 2.5:
            assert any("'phone' expired" in a["message"] for a in client.alerts())
        with pytest.raises(SessionInUseError):  # it holds the live lease again
            client.session("phone", timeout=30)
        for text in after:
            prices.publish(text.encode())
        seen = delivered(lines.until(lambda seen: delivered(seen)[-1:] == [after[-1]]))
    assert not any(" 1" in line for line in lines.seen if line.startswith("event"))
    assert len(seen) == len(set(seen))  # no duplicate
    assert seen == sorted(seen)  # in publish order (p < q < r)
    assert seen[:3] == before and seen[-3:] == after  # nothing lost but ...
    lost = [text for text in during if text not in seen]
    # ... what was queued while away, and only when the session expired with it
    assert lost == [] if keep_alive > 2.5 else len(lost) <= 3
    assert lines.seen[-1:] != ["state closed"]


def test_a_session_stopped_while_another_client_opened_it_is_closed_when_it_wakes(
    server_url: str,
    namespace: str,
    client: durables.Client,
    prices: durables.Channel,
    client_kind: str,
) -> None:
    """A session's process stopped past its live lease while another client opens the
    session: the session is the other client's. Woken, the stopped one is closed, not
    live again; from then on everything goes to the other, once, in order. Counted: what
    was published during the stop reaches the session at least once (through either
    client: a read the stopped one had under way, or made before it noticed, may take
    some), and what was published after reaches the other client alone."""
    during, after = ([f"{phase}{i}" for i in range(1, 4)] for phase in ("q", "r"))
    child = STOPPED_AIO if client_kind == "aio" else STOPPED
    with python_child(child, server_url, namespace, "30") as proc:
        lines = Lines(proc)
        lines.until(lambda seen: "ready" in seen)
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            for text in during:
                prices.publish(text.encode())
            other = once_free(lambda: client.session("phone", timeout=30), SessionInUseError)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        rec = Recorder()
        with other:
            assert other.resumed
            other.add_listener("prices", rec)
            other.ready_for_events()
            states = lines.until(lambda seen: "state closed" in seen)
            assert [line for line in states if "state" in line] == [
                "state disconnected",
                "state closed",
            ]
            for text in after:
                prices.publish(text.encode())
            deadline = time.monotonic() + 5
            while after[-1] not in [t for _, t, _ in rec.log] and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.3)  # time for anything the closed one might still read
    got = [t for kind, t, _ in rec.log if kind == "event"]
    stopped = [line.split()[1] for line in lines.seen if line.startswith("event")]
    assert [t for t in got if t in after] == after  # once each, in order, to the other
    assert not set(stopped) & set(after)  # the closed one read nothing after it woke
    assert set(got) | set(stopped) == set(during + after)  # lost: none
    assert len(got) == len(set(got))  # no duplicate within the other client
    assert [t for t in got if t in during] == sorted(t for t in got if t in during)


def test_a_session_away_past_its_timeout_starts_anew_with_an_alert(
    client: durables.Client, prices: durables.Channel, caplog: pytest.LogCaptureFixture
) -> None:
    with client.session("late", timeout=0.3) as s:
        s.register_interest("prices")
    prices.publish(b"old", key="A")
    time.sleep(0.5)
    rec = Recorder()
    with caplog.at_level(logging.WARNING, logger="durables"):
        s = client.session("late", timeout=30)
    with s:
        assert not s.resumed
        assert s.interests == {}
        s.register_interest("prices")
        s.add_listener("prices", rec)
        s.ready_for_events()
        assert rec.live.wait(5)
        time.sleep(0.2)
    assert rec.log == [("live", "prices", False)]  # nothing old replayed
    assert any("'late' expired" in r.getMessage() for r in caplog.records)
    assert client.alerts()[0]["session"] == "late"


def test_housekeeping_reaps_expired_sessions(
    client: durables.Client, prices: durables.Channel
) -> None:
    with client.session("gone", timeout=0.2) as s:
        s.register_interest("prices")
    time.sleep(0.4)
    assert client.housekeep().expired_sessions == ["gone"]
    assert client.sessions() == []
    assert prices.info().durables == ()


def test_close_without_keepalive_removes_the_session_at_once(
    client: durables.Client, prices: durables.Channel
) -> None:
    with client.session("brief", timeout=30) as s:
        s.register_interest("prices")
        s.close(keepalive=False)
    assert client.sessions() == []
    prices.publish(b"x", key="A")
    with client.session("brief", timeout=30) as s:
        assert not s.resumed and s.interests == {}


def test_non_durable_interests_are_dropped_at_a_disconnect(
    client: durables.Client, prices: durables.Channel
) -> None:
    client.channel("news")
    with client.session("mixed", timeout=30) as s:
        s.register_interest("prices", durable=True)
        s.register_interest("news", durable=False)
    client.channel("news").publish(b"missed")
    with client.session("mixed", timeout=30) as s:
        assert s.resumed and set(s.interests) == {"prices"}


def test_updates_while_disconnected_raise_unconnected_but_the_cache_still_reads(
    client: durables.Client, prices: durables.Channel
) -> None:
    s = client.session("offline", timeout=30)
    s.register_interest("prices")
    s.put("prices", "AAPL", b"100")
    assert prices.last_values()["AAPL"][1] == b"100"
    s.close()
    assert s.cache("prices").get("AAPL") == b"100"
    with pytest.raises(UnconnectedError):
        s.put("prices", "AAPL", b"101")
    with pytest.raises(UnconnectedError):
        s.destroy("prices", "AAPL")
    assert prices.last_values()["AAPL"][1] == b"100"


def test_a_server_gone_away_makes_updates_unconnected(
    fresh_server: RedisProcess, namespace: str
) -> None:
    with durables.connect(fresh_server.url, namespace=namespace, lease_timeout_s=1) as client:
        client.channel("prices", keyed=True)
        s = client.session("flaky", timeout=30)
        s.register_interest("prices")
        s.put("prices", "A", b"1")
        fresh_server.kill9()
        with pytest.raises(UnconnectedError):
            s.put("prices", "A", b"2")
        assert s.cache("prices").get("A") == b"1"
        assert not s.connected
