"""Durable client sessions: interest, timeout, marker replay, client cache (seed 000)."""

from __future__ import annotations

import logging
import os
import signal
import textwrap
import threading
import time
from dataclasses import dataclass, field

import pytest

import durables
from durables import ALL_KEYS, ChannelNotFound, ConfigError, SessionInUseError, UnconnectedError

from .children import Lines, first_line, once_free, python_child
from .servers import RedisProcess

pytestmark = [pytest.mark.on_cluster, pytest.mark.both_clients]


@dataclass
class Recorder:
    """A session listener that writes down what happened, in order."""

    log: list[tuple[str, str, bool]] = field(default_factory=list)
    live: threading.Event = field(default_factory=threading.Event)

    def on_event(self, event: durables.Event) -> None:
        self.log.append(("event", event.text if not event.destroyed else "-", event.replayed))

    def events(self) -> int:
        return sum(1 for kind, _, _ in self.log if kind == "event")

    def after_region_live(self, channel: str) -> None:
        self.log.append(("live", channel, False))
        self.live.set()


def wait_for(recorder: Recorder, events: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while recorder.events() < events:
        assert time.monotonic() < deadline, recorder.log
        time.sleep(0.01)


@pytest.fixture
def prices(client: durables.Client) -> durables.Channel:
    return client.channel("prices", keyed=True)


def test_replay_then_after_region_live_then_live_events_update_the_cache(
    client: durables.Client, prices: durables.Channel
) -> None:
    with client.session("mobile", timeout=30) as s:
        s.register_interest("prices")
    prices.publish(b"100", key="AAPL")  # queued while away
    prices.publish(b"101", key="AAPL")
    rec = Recorder()
    with client.session("mobile", timeout=30) as s:
        assert s.resumed
        s.cache("prices").put("AAPL", b"99-local")
        s.add_listener("prices", rec)
        s.ready_for_events()
        wait_for(rec, 2)
        assert rec.live.wait(5)
        assert s.cache("prices").get("AAPL") == b"99-local"  # replayed events left it alone
        prices.publish(b"102", key="AAPL")
        wait_for(rec, 3)
        assert s.cache("prices").get("AAPL") == b"102"  # the live one updated it
    assert rec.log == [
        ("event", "100", True),
        ("event", "101", True),
        ("live", "prices", False),
        ("event", "102", False),
    ]


def test_a_brand_new_session_replays_what_came_between_registration_and_ready(
    client: durables.Client, prices: durables.Channel
) -> None:
    rec = Recorder()
    with client.session("fresh", timeout=30) as s:
        assert not s.resumed
        s.register_interest("prices")
        prices.publish(b"1", key="A")
        s.add_listener("prices", rec)
        s.ready_for_events()
        wait_for(rec, 1)
        assert rec.live.wait(5)
        prices.publish(b"2", key="A")
        wait_for(rec, 2)
    assert rec.log == [("event", "1", True), ("live", "prices", False), ("event", "2", False)]


def test_after_region_live_comes_once_per_channel_even_with_nothing_to_replay(
    client: durables.Client, prices: durables.Channel
) -> None:
    client.channel("news")
    rec = Recorder()
    with client.session("two", timeout=30) as s:
        s.register_interest("prices")
        s.register_interest("news")
        s.add_listener("prices", rec)
        s.add_listener("news", rec)
        s.ready_for_events()
        deadline = time.monotonic() + 5
        while len(rec.log) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        client.channel("news").publish(b"n1")
        wait_for(rec, 1)
    assert sorted(rec.log[:2]) == [("live", "news", False), ("live", "prices", False)]
    assert rec.log[2:] == [("event", "n1", False)]


def test_interest_in_some_keys_or_a_regex_queues_only_those(
    client: durables.Client, prices: durables.Channel
) -> None:
    rec = Recorder()
    with client.session("picky", timeout=30) as s:
        s.register_interest("prices", ["AAPL"])
        s.register_interest("prices", regex="MS.*")  # replaces the first interest
        s.add_listener("prices", rec)
        s.ready_for_events()
        for key in ("AAPL", "MSFT", "MSCI", "IBM"):
            prices.publish(key.encode(), key=key)
        wait_for(rec, 2)
        time.sleep(0.2)
    assert [text for kind, text, _ in rec.log if kind == "event"] == ["MSFT", "MSCI"]


# -- interest responses and the client cache ------------------------------------------


def test_interest_response_fills_an_empty_cache_with_current_values(
    client: durables.Client, prices: durables.Channel
) -> None:
    prices.publish(b"100", key="AAPL")
    prices.publish(b"50", key="MSFT")
    with client.session("s", timeout=30) as s:
        assert s.register_interest("prices", ["AAPL"]) == {"AAPL": b"100"}
        assert s.cache("prices").items() == {"AAPL": b"100"}


def test_interest_response_rules_one_by_one(
    client: durables.Client, prices: durables.Channel
) -> None:
    for key, value in (("valid", b"server"), ("invalid", b"server"), ("destroyed", b"server")):
        prices.publish(value, key=key)
    with client.session("s", timeout=30) as s:
        cache = s.cache("prices")
        cache.put("valid", b"app")  # an application operation came first
        cache.invalidate("invalid")
        cache.destroy("destroyed")
        s.register_interest("prices")
        assert cache.get("valid") == b"app"  # a valid entry is not overwritten
        assert cache.get("invalid") == b"server"  # an invalid one is replaced
        assert cache.entry("destroyed") is None  # not updated, removed after the response
        assert "destroyed" not in cache


def test_an_empty_interest_response_leaves_the_cache_empty(
    client: durables.Client, prices: durables.Channel
) -> None:
    with client.session("s", timeout=30) as s:
        assert s.register_interest("prices") == {}
        assert len(s.cache("prices")) == 0


def test_live_tombstones_remove_cache_entries(
    client: durables.Client, prices: durables.Channel
) -> None:
    rec = Recorder()
    with client.session("s", timeout=30) as s:
        s.register_interest("prices")
        s.add_listener("prices", rec)
        s.ready_for_events()
        assert rec.live.wait(5)
        prices.publish(b"1", key="K")
        wait_for(rec, 1)
        assert s.cache("prices").get("K") == b"1"
        prices.remove_key("K")
        wait_for(rec, 2)
        assert s.cache("prices").entry("K") is None


# -- disconnects, timeouts, keepalive -------------------------------------------------


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
    server_url: str, namespace: str, client: durables.Client, prices: durables.Channel,
    keep_alive: float, client_kind: str,
) -> None:  # fmt: skip
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
    server_url: str, namespace: str, client: durables.Client, prices: durables.Channel,
    client_kind: str,
) -> None:  # fmt: skip
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


# -- bad input -------------------------------------------------------------------------


def test_bad_interests_and_a_second_live_session_are_refused(
    client: durables.Client, prices: durables.Channel
) -> None:
    with client.session("first", timeout=30) as first:
        with pytest.raises(ChannelNotFound):
            first.register_interest("no-such-channel")
        with pytest.raises(ConfigError, match="regex"):
            first.register_interest("prices", regex="(unclosed")
        with pytest.raises(ConfigError):
            first.register_interest("prices", keys="AAPL")
        with pytest.raises(SessionInUseError):
            client.session("first", timeout=30)
        first.register_interest("prices")  # the first keeps working
        first.put("prices", "A", b"1")
        assert set(first.interests) == {"prices"}
    with pytest.raises(durables.InvalidNameError):
        client.session("bad id", timeout=30)
    with pytest.raises(ConfigError):
        client.session("ok", timeout=0)
    assert ALL_KEYS is durables.ALL_KEYS


def test_a_deliberate_close_is_logged_as_news_not_as_a_warning(
    client: durables.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="durables"), client.session("calm", timeout=30):
        pass
    closes = [r for r in caplog.records if "-> closed" in r.getMessage()]
    assert closes and all(r.levelno == logging.INFO for r in closes)


def test_a_plain_function_is_a_listener_and_anything_else_is_refused_at_once(
    client: durables.Client,
) -> None:
    got: list[str] = []
    channel = client.channel("orders")
    with client.session("fn", timeout=30) as s:
        s.register_interest("orders")
        s.add_listener("orders", lambda event: got.append(event.text))
        with pytest.raises(ConfigError, match="function of the event or an object"):
            s.add_listener("orders", 42)  # type: ignore[arg-type]
        s.ready_for_events()
        channel.publish("hello")
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
    assert got == ["hello"]
