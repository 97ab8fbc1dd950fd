"""Session queue limits (Diffusion's client reconnection): `max_depth` while connected, the larger
`disconnected_max_depth` while away, the 80 % revert after reconnecting, and both
overflow policies, with nothing lost silently."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

import durables

from .conftest import FAST
from .helpers import command_calls
from .session_support import Recorder, wait_for

AWAY_S = FAST["lease_timeout_s"] * 1.5
"""Long enough for the server to see a session as away (its consumer idle past its lease)."""


class Gate:
    """A session listener that takes one event at a time, when the test lets it."""

    def __init__(self) -> None:
        self.got: list[str] = []
        self.allowed = threading.Semaphore(0)
        self.arrived = threading.Semaphore(0)

    def on_event(self, event: durables.Event) -> None:
        self.got.append(event.text)
        self.arrived.release()
        self.allowed.acquire(timeout=10)


def closes(session: durables.Session, within_s: float = 10) -> bool:
    """True once the session closes itself (an overflow with the 'close' policy)."""
    deadline = time.monotonic() + within_s
    while session.state != "closed" and time.monotonic() < deadline:
        time.sleep(0.05)
    return session.state == "closed"


def away_session(client: durables.Client, name: str, **limits: object) -> None:
    """Open a session with an interest, read once, and leave it (keep-alive on). A close
    whose lease release times out (a loaded machine: seen in CI) leaves the lease to lapse
    by itself, so the tests open the session again with a short `wait`."""
    s = client.session(name, timeout=60, **limits)  # type: ignore[arg-type]
    s.register_interest("orders")
    s.ready_for_events()
    time.sleep(0.3)  # its consumer has read once: the server knows it
    s.close(keepalive=True)


def test_the_limit_expands_while_away_and_reverts_at_80_percent_event_by_event(
    client: durables.Client,
) -> None:
    ch = client.channel("orders")
    away_session(client, "phone", max_depth=5, disconnected_max_depth=10, recovery_buffer=1)
    time.sleep(AWAY_S)
    for i in range(1, 9):
        ch.publish(f"e{i}")  # 8 > max_depth: only the disconnected limit lets them stay
    gate = Gate()
    s = client.session(  # wait: a close that could not give up its lease under load
        "phone", timeout=60, max_depth=5, disconnected_max_depth=10, recovery_buffer=1, wait=5
    )
    assert s.resumed
    s.add_listener("orders", gate)
    seen: list[tuple[int, int | None]] = []
    s.ready_for_events()
    for _ in range(8):
        assert gate.arrived.acquire(timeout=10)
        time.sleep(0.05)  # the previous event's ack has gone out
        info = s.info()
        seen.append((info.depth, info.queue_limit))
        gate.allowed.release()
    # one event in the listener's hands (in flight) at each look: depth counts it
    assert seen == [(8, 10), (7, 10), (6, 10), (5, 10), (4, 5), (3, 5), (2, 5), (1, 5)]
    assert gate.got == [f"e{i}" for i in range(1, 9)]
    assert ch.nacks() == []
    s.close()


@pytest.mark.both_clients
def test_a_session_closed_with_keepalive_has_the_larger_limit_at_once(
    client: durables.Client,
) -> None:
    """Away by its own word: no wait for the server to see its consumer idle."""
    ch = client.channel("orders")
    limits: dict[str, Any] = {"max_depth": 3, "disconnected_max_depth": 5}
    s = client.session("phone", timeout=60, **limits)
    s.register_interest("orders")
    s.ready_for_events()
    time.sleep(0.3)  # its consumer has read: the server has seen it lately
    s.close(keepalive=True)
    for i in range(1, 6):
        ch.publish(f"e{i}")  # 5 > max_depth: only the disconnected limit lets them stay
    rec = Recorder()
    back = client.session("phone", timeout=60, wait=5, **limits)  # (as above)
    assert (back.resumed, back.state) == (True, "connected")
    info = back.info()
    assert (info.depth, info.queue_limit) == (5, 5)
    back.add_listener("orders", rec)
    back.ready_for_events()
    wait_for(rec, 5)
    assert [text for kind, text, _ in rec.log if kind == "event"] == [f"e{i}" for i in range(1, 6)]
    back.close()


@pytest.mark.both_clients
def test_a_session_closed_by_an_overflow_while_away_starts_anew_with_an_alert(
    client: durables.Client, caplog: pytest.LogCaptureFixture
) -> None:
    """The queue is discarded at the first event beyond the limit; coming back is as after
    a timeout: a new session (nothing old replayed), the closing logged and recorded."""
    ch = client.channel("orders")
    away_session(client, "small", max_depth=3)
    time.sleep(AWAY_S)
    for i in range(1, 5):
        ch.publish(f"e{i}")  # the 4th is beyond the limit: the queue goes
    with caplog.at_level(logging.WARNING):
        s = client.session("small", timeout=60, max_depth=3)
    assert (s.resumed, s.state) == (False, "connected")
    assert s.interests == {}
    assert any("'small' was closed" in r.getMessage() for r in caplog.records)
    assert any("'small' was closed" in a["message"] for a in client.alerts())
    rec = Recorder()
    s.register_interest("orders")
    s.add_listener("orders", rec)
    s.ready_for_events()
    ch.publish("e5")
    wait_for(rec, 1)
    time.sleep(0.3)
    assert [text for kind, text, _ in rec.log if kind == "event"] == ["e5"]
    assert s.info().queue_limit == 3
    s.close(keepalive=False)
    assert "small" not in [r.id for r in client.sessions()]


@pytest.mark.both_clients
def test_housekeeping_removes_a_session_an_overflow_closed_while_away_with_an_alert(
    client: durables.Client,
) -> None:
    """The alert is recorded whether the session comes back or not."""
    ch = client.channel("orders")
    away_session(client, "small", max_depth=3)
    time.sleep(AWAY_S)
    for i in range(1, 5):
        ch.publish(f"e{i}")
    report = client.housekeep()
    assert (report.closed_sessions, report.expired_sessions) == (["small"], [])
    assert any("'small' was closed" in a["message"] for a in client.alerts())
    assert "small" not in [r.id for r in client.sessions()]
    s = client.session("small", timeout=60, max_depth=3)
    assert (s.resumed, s.state) == (False, "connected")
    s.close(keepalive=False)


def test_overflow_drop_oldest_keeps_the_newest_and_says_how_many_went(
    client: durables.Client, caplog: pytest.LogCaptureFixture
) -> None:
    ch = client.channel("orders")
    away_session(client, "lossy", max_depth=3, overflow="drop_oldest")
    time.sleep(AWAY_S)
    for i in range(1, 6):
        ch.publish(f"e{i}")
    gate = Gate()
    with caplog.at_level(logging.WARNING):
        s = client.session("lossy", timeout=60, max_depth=3, overflow="drop_oldest")
    s.add_listener("orders", gate)
    s.ready_for_events()
    for _ in range(3):
        assert gate.arrived.acquire(timeout=10)
        gate.allowed.release()
    time.sleep(0.3)
    assert gate.got == ["e3", "e4", "e5"]
    assert any("lost its 2 oldest" in r.getMessage() for r in caplog.records)
    s.close()


def test_a_connected_session_overflows_at_max_depth(client: durables.Client) -> None:
    ch = client.channel("orders")
    s = client.session("busy", timeout=60, max_depth=2, disconnected_max_depth=50)
    s.register_interest("orders")
    gate = Gate()
    s.add_listener("orders", gate)
    s.ready_for_events()
    ch.publish("e1")
    assert gate.arrived.acquire(timeout=10)  # held by the listener: 1 in flight
    ch.publish("e2")
    assert s.info().depth == 2 and s.info().queue_limit == 2
    ch.publish("e3")  # beyond max_depth while connected
    gate.allowed.release()
    assert closes(s)
    s.close()


def test_a_limit_holds_on_a_channel_published_to_before_any_session_had_one(
    client: durables.Client,
) -> None:
    """Publishes count toward trip points only while some session has a limit: the
    count standing still before must not move a later session's trip point."""
    ch = client.channel("orders")
    ch.publish_many([durables.Message(f"old {i}") for i in range(5)])
    ch.publish("older")
    s = client.session("late", timeout=60, max_depth=2, disconnected_max_depth=50)
    s.register_interest("orders")
    gate = Gate()
    s.add_listener("orders", gate)
    s.ready_for_events()
    ch.publish("e1")
    assert gate.arrived.acquire(timeout=10)
    ch.publish_many([durables.Message("e2")])
    assert s.info().depth == 2 and s.info().queue_limit == 2
    ch.publish("e3")  # beyond max_depth: the trip point set at connect is reached now
    gate.allowed.release()
    assert closes(s)
    s.close()


def test_queue_limits_are_checked(client: durables.Client) -> None:
    for bad in (
        {"max_depth": 0},
        {"disconnected_max_depth": -1},
        {"overflow": "spill"},
        {"recovery_buffer": 1.5},
    ):
        with pytest.raises(durables.ConfigError):
            client.session("bad", timeout=60, **bad)


def test_dropping_the_oldest_keeps_the_session_groups_lag_known(client: durables.Client) -> None:
    """A session that never read has a group without a read counter (made at '$' before
    the channel had a stream); dropping its oldest events moves the group, and must set
    the counter too: with the lag unknown, every later look at its queue (each publish
    while it sits at its limit, each metrics scrape) read every unread event again."""
    ch = client.channel("orders")
    s = client.session("unread", timeout=60, max_depth=3, overflow="drop_oldest")
    s.register_interest("orders")
    s.close(keepalive=True)
    for i in range(1, 7):
        ch.publish(f"e{i}")
    stream, group = client.keys("orders").stream, durables.keys.session_group("unread")
    (info,) = [g for g in client.redis.xinfo_groups(stream) if g["name"].decode() == group]
    assert (info["lag"], info["pending"]) == (3, 0)
    unread: Any = client.redis.xrange(stream, "(" + info["last-delivered-id"].decode(), "+")
    assert [fields[b"d"] for _, fields in unread] == [b"e4", b"e5", b"e6"]


def _queue(client: durables.Client, session_id: str) -> tuple[list[bytes], list[bytes]]:
    """The payloads of a session's queue on 'orders', as the server holds it: those read and
    not acknowledged (pending), then those not read yet."""
    stream, group = client.keys("orders").stream, durables.keys.session_group(session_id)
    (info,) = [g for g in client.redis.xinfo_groups(stream) if g["name"].decode() == group]
    pending: Any = client.redis.xpending_range(stream, group, "-", "+", 1000)
    held: list[Any] = [
        client.redis.xrange(stream, p["message_id"], p["message_id"]) for p in pending
    ]
    unread: Any = client.redis.xrange(stream, "(" + info["last-delivered-id"].decode(), "+")
    return ([fields[b"d"] for ((_, fields),) in held], [fields[b"d"] for _, fields in unread])


def _at_limit(client: durables.Client, session_id: str) -> durables.Channel:
    """A session away with a limit of 3 (overflow 'drop_oldest'), which 'e1'..'e5' overflow:
    'e3', 'e4', 'e5' are its queue."""
    ch = client.channel("orders")
    s = client.session(session_id, timeout=60, max_depth=3, overflow="drop_oldest")
    s.register_interest("orders")
    s.close(keepalive=True)
    for i in range(1, 6):
        ch.publish(f"e{i}")
    assert _queue(client, session_id) == ([], [b"e3", b"e4", b"e5"])
    return ch


def _group_lists(client: durables.Client) -> int:
    return command_calls(client.redis, "xinfo|groups")


def test_publishing_to_a_session_at_its_limit_asks_for_no_other_groups(
    client: durables.Client,
) -> None:
    """Every publish looks at a session that sits at its limit. No command gives one group's
    position: XINFO GROUPS answers for every group of the channel (one per session interested
    in it, about 11,000 server instructions each), and with 1,000 sessions a single publish
    cost the server 190 times what it costs with none. The look starts from the position the
    last one left."""
    ch = _at_limit(client, "lossy")
    stream = client.keys("orders").stream
    for i in range(200):
        client.redis.xgroup_create(stream, f"~session:other{i}", "$")
    before = _group_lists(client)
    for i in range(6, 21):
        ch.publish(f"e{i}")
    assert _group_lists(client) - before == 0
    assert _queue(client, "lossy") == ([], [b"e18", b"e19", b"e20"])


def test_a_session_read_between_two_looks_at_its_limit_loses_only_its_oldest(
    client: durables.Client,
) -> None:
    """The position a look notes holds for the next look only while the group's consumer
    has not read since: here it reads between the looks (the first time, then again), and
    each next look must drop the oldest of what it holds, not move the group back over
    what it read."""
    ch = _at_limit(client, "lossy")
    stream, group = client.keys("orders").stream, durables.keys.session_group("lossy")
    consumer = durables.ops.sessions.CONSUMER
    client.redis.xreadgroup(group, consumer, {stream: ">"}, count=1)
    ch.publish("e6")
    assert _queue(client, "lossy") == ([], [b"e4", b"e5", b"e6"])
    client.redis.xreadgroup(group, consumer, {stream: ">"}, count=2)
    ch.publish("e7")
    assert _queue(client, "lossy") == ([b"e5"], [b"e6", b"e7"])


def test_a_purge_between_two_looks_at_a_sessions_limit_is_no_overflow(
    client: durables.Client,
) -> None:
    """A purge moves the session's group past what it removed: the next look must not go by
    the position the last one left, which would count the purged events as queued still."""
    ch = _at_limit(client, "lossy")
    assert ch.purge() == 5
    ch.publish("n1")
    ch.publish("n2")
    assert _queue(client, "lossy") == ([], [b"n1", b"n2"])


def test_a_session_removed_leaves_no_queue_limits_on_its_channels(
    client: durables.Client,
) -> None:
    """Its group goes, and with it its limits and trip point: a group made again under the
    same name starts elsewhere than the position the limits noted."""
    _at_limit(client, "lossy")
    k = client.keys("orders")
    client.session("lossy", timeout=60, max_depth=3, overflow="drop_oldest").close(keepalive=False)
    assert client.redis.hget(k.session_limits, "lossy") is None
    assert client.redis.zscore(k.session_trips, "lossy") is None


def test_publishing_to_a_live_session_at_its_limit_asks_for_no_other_groups(
    client: durables.Client,
) -> None:
    """A live session whose listener is slower than its publisher sits at its limit too, its
    consumer having read a moment ago: the look goes by the position the last look noted,
    with that read, and not by XINFO GROUPS at every publish."""
    ch = client.channel("orders")
    stream = client.keys("orders").stream
    for i in range(200):
        client.redis.xgroup_create(stream, f"~session:other{i}", "$", mkstream=True)
    s = client.session("slow", timeout=60, max_depth=3, overflow="drop_oldest")
    s.register_interest("orders")
    gate = Gate()
    s.add_listener("orders", gate)
    s.ready_for_events()
    ch.publish("e1")
    assert gate.arrived.acquire(timeout=10)  # the listener holds it
    time.sleep(0.05)  # its read is not so recent that a server's clock could blur it
    before = _group_lists(client)
    for i in range(2, 21):
        ch.publish(f"e{i}")
    lists = _group_lists(client) - before
    gate.allowed.release()
    s.close()
    assert lists <= 4  # one per publish, 17, before (the first look must ask: it is new)


def test_a_batch_beyond_a_sessions_limit_leaves_it_the_newest_without_reading_the_rest(
    client: durables.Client,
) -> None:
    """When what a session keeps is among the events just published, its group moves to the
    one before them: an XRANGE of the events passed over (each returned, and parsed by Lua)
    made most of the server's work of a batch of 100 with 10 sessions at a limit of 50. A
    batch with producer message ids may return old ids for repeats: it reads them."""
    ch = _at_limit(client, "lossy")
    stream, group = client.keys("orders").stream, durables.keys.session_group("lossy")
    client.redis.xreadgroup(group, durables.ops.sessions.CONSUMER, {stream: ">"}, count=1)
    before = command_calls(client.redis, "xrange")
    ch.publish_many([durables.Message(f"f{i}") for i in range(1, 101)])
    assert command_calls(client.redis, "xrange") - before == 0
    assert _queue(client, "lossy") == ([], [b"f98", b"f99", b"f100"])
    ch.publish_many([durables.Message(f"g{i}", message_id=f"m{i}") for i in range(1, 5)])
    assert _queue(client, "lossy") == ([], [b"g2", b"g3", b"g4"])
    again = [durables.Message(f"n{i}", message_id=f"n{i}") for i in range(1, 4)]
    ch.publish_many([*again, durables.Message("g2", message_id="m2")])  # the last: old
    assert _queue(client, "lossy") == ([], [b"n1", b"n2", b"n3"])


def test_sessions_come_back_without_asking_for_every_group_of_their_channels(
    client: durables.Client,
) -> None:
    """A channel has a group for each session interested in it, so a session that asks for
    every group (XINFO GROUPS) each time it opens makes 1,000 sessions coming back at once
    a million groups' worth of server work. Opening needs no depth of a queue without
    limits, and one with limits starts from the position its last look noted."""
    ch = client.channel("orders")
    stream = client.keys("orders").stream
    for i in range(200):
        client.redis.xgroup_create(stream, f"~session:other{i}", "$", mkstream=True)
    kinds: dict[str, dict[str, Any]] = {
        "plain": {},
        "limited": {"max_depth": 3, "overflow": "drop_oldest"},
    }
    for name, limits in kinds.items():
        s = client.session(name, timeout=60, **limits)
        s.register_interest("orders")
        s.close(keepalive=True)
    for i in range(1, 6):
        ch.publish(f"e{i}")
    before = _group_lists(client)
    for name, limits in kinds.items():
        s = client.session(name, timeout=60, wait=5, **limits)  # (as above)
        assert s.resumed
        s.close(keepalive=True)
    assert _group_lists(client) - before == 0
    assert _queue(client, "limited") == ([], [b"e3", b"e4", b"e5"])
    assert _queue(client, "plain") == ([], [b"e1", b"e2", b"e3", b"e4", b"e5"])
    s = client.session("plain", timeout=60)
    assert s.info().depth == 5  # counted when asked for
    s.close(keepalive=True)
