"""The readers' state machines without a server, step by step: the exclusive cursor, the
shared (and serial) hand-out and the session cursors, each fed replies as the server
would send them."""

from __future__ import annotations

from typing import Any

import pytest
from redis.exceptions import ResponseError

from durables import ConnectionLostError, DurableNotFoundError, LeaseLostError
from durables.key_hash import key_hash
from durables.ops import sessions
from durables.ops.sessions import interest_matches
from durables.readers.exclusive.cursor import ExclusiveCursor
from durables.readers.shared.handout import READ_AHEAD_WINDOW, SharedHandout
from durables.readers.shared.ledger import RECENT_ACKS, Ledger
from durables.records import Interest
from durables.selector import compile_filter

from .test_ops import K, entry

# -- the exclusive cursor -----------------------------------------------------------------


def cursor(**kw: Any) -> ExclusiveCursor:
    return ExclusiveCursor(K, "d", "tok", lease_ms=1000, batch=10, **kw)


def test_exclusive_reads_its_history_first_then_new_events() -> None:
    c = cursor()
    (read,) = c.read()  # nothing to acknowledge: the read alone
    gate = K.gate("d", "tok")
    assert read.args == (
        "XREADGROUP",
        "GROUP",
        "d",
        "tok",
        "COUNT",
        10,
        "STREAMS",
        K.stream,
        gate,
        "0",
        ">",
    )
    events, again = c.on_read([[entry("5-0", d="x")]])
    assert [e.id for e in events] == ["5-0"] and not again
    assert c.read()[-1].args[-2:] == ("5-0", ">")
    events, again = c.on_read([[]])
    assert events == [] and again  # history done: read new ones at once
    assert c.read()[-1].args[-2:] == (">", ">")


def test_exclusive_reads_and_waits_through_its_gate() -> None:
    c = cursor()
    assert "BLOCK" not in c.read(0.25)[-1].args  # history is read at once
    c.cursor = ">"
    (wait,) = c.read(0.25)  # new events: blocks for them in the same round trip
    assert wait.args == (
        "XREADGROUP",
        "GROUP",
        "d",
        "tok",
        "COUNT",
        10,
        "BLOCK",
        250,
        "STREAMS",
        K.stream,
        K.gate("d", "tok"),
        ">",
        ">",
    )
    assert wait.tolerate == {"NOGROUP", "UNBLOCKED"}
    came = [[K.stream.encode(), [entry("8-0", d="x")]]]
    assert wait.parse(came) == [entry("8-0", d="x")]
    assert wait.parse(None) == []
    gone = ResponseError(f"NOGROUP No such key '{K.gate('d', 'tok')}' or consumer group 'd'")
    with pytest.raises(LeaseLostError, match="took the durable over"):
        wait.parse(gone)
    with pytest.raises(LeaseLostError):
        wait.parse(ResponseError("UNBLOCKED the stream key no longer exists"))
    with pytest.raises(DurableNotFoundError):  # the durable's own group is gone: not a takeover
        wait.parse(ResponseError(f"NOGROUP No such key '{K.stream}' or consumer group 'd'"))
    with pytest.raises(ConnectionLostError):  # a demoted primary: reconnect
        wait.parse(ResponseError("UNBLOCKED force unblock from blocking operation"))


def test_exclusive_deferred_ack_rides_with_the_next_read_and_survives_a_failed_send() -> None:
    c = cursor()
    c.cursor = ">"
    events = c.events([entry("1-0", d="a"), entry("2-0", d="b")])
    assert c.commit(events, defer=True) is None
    ack, _ = c.read()
    # up to 2-0, naming the ids read since the last ack so the script need not look them up
    assert ack.script == "ack_exclusive" and ack.args[3:] == ("2-0", "1-0", "2-0")
    c.read_failed()
    assert c.read()[0].args[3] == "2-0"  # not lost: sent with the next try
    c.on_read([0, []])
    assert len(c.read()) == 1  # nothing left to acknowledge


def test_exclusive_reads_its_pending_list_after_a_read_whose_reply_was_lost() -> None:
    """A read of new events that failed or was cancelled may have taken events the
    application never got: the next read looks past the newest handed out, in the
    pending list, before it reads new ones (else a later cumulative ack covers them)."""
    c = cursor()
    c.cursor = ">"
    c.events([entry("1-0", d="a"), entry("2-0", d="b")])  # handed out
    c.read()
    c.read_failed()  # its reply lost: did it take 3-0 ...?
    assert c.read()[-1].args[-2:] == ("2-0", ">")
    events, again = c.on_read([[entry("3-0", d="c")]])
    assert [e.id for e in events] == ["3-0"] and not events[0].redelivered and not again
    c.on_read([[]])
    assert c.read()[-1].args[-2:] == (">", ">")  # nothing more: new ones again


def test_exclusive_reads_withdrawn_events_again_at_the_next_read() -> None:
    c = cursor()
    c.cursor = ">"
    c.events([entry("1-0", d="a")])
    withdrawn = c.events([entry("2-0", d="b"), entry("3-0", d="c")])
    c.withdraw(withdrawn)  # read, then not handed out (a cancelled lease check)
    assert c.read()[-1].args[-2:] == ("1-0", ">")
    again, _ = c.on_read([[entry("2-0", d="b"), entry("3-0", d="c")]])
    assert [e.id for e in again] == ["2-0", "3-0"] and c.discarded == 0


def test_exclusive_acks_never_pass_a_rolled_back_event() -> None:
    c = cursor()
    events = c.events([entry(f"{i}-0", d="x") for i in (1, 2, 3)])
    rollback = c.rollback([events[1]])
    assert rollback is not None and rollback.script == "add_members"  # an SADD at maxmemory too
    assert rollback.keys == (K.keep("d"),) and rollback.args == ("2-0",)
    ack = c.commit(events)
    assert ack is not None and ack.args[3:] == ("1-0", "1-0")  # stops below the rolled-back 2-0
    explicit, left = c.ack(events[2], events)
    assert explicit is not None and explicit.args[3:] == ("3-0", "2-0", "3-0") and left == []
    assert c.limit is None  # an explicit cumulative ack went past it


def test_exclusive_filters_skip_events_and_ack_them_with_the_rest() -> None:
    selector = compile_filter("region = 'eu'")
    assert selector is not None
    c = cursor(selectors=[selector])
    us, eu = '{"region":"us"}', '{"region":"eu"}'
    got = c.events(
        [entry("1-0", d="a", p=us), entry("2-0", d="b", p=eu), entry("3-0", d="c", p=us)]
    )
    assert [e.id for e in got] == ["2-0"]
    assert c.skipped == "3-0"
    ack = c.commit(got)
    assert ack is not None and ack.args[3] == "3-0" and c.skipped is None


def test_exclusive_release_sends_the_deferred_ack_then_gives_up_the_lease() -> None:
    c = cursor()
    events = c.events([entry("7-0", d="a"), entry("8-0", d="b")])
    c.commit(events[:1], defer=True)
    ack, release = c.release(events[1:])
    assert ack.args[3:] == ("7-0", "7-0")
    assert release.script == "release_exclusive" and release.args == ("tok", "8-0")


# -- the shared hand-out ------------------------------------------------------------------


def handout() -> SharedHandout:
    return SharedHandout(K, "d", "shared", "w#1", window=3, lease_ms=1000)


def dealt_reply(
    counts: list[bytes] | None = None, version: int = 0, by: bytes = b"", tap: int | None = None
) -> list[Any]:
    reply = [b"9-0", b"0-0", counts or [], 0, version, by]
    return reply if tap is None else [*reply, tap]


def test_shared_fetch_carries_the_acks_and_hands_each_event_out_once() -> None:
    h = handout()
    first = h.on_fetch([dealt_reply([b"1-0", b"2"]), [entry("1-0", d="a"), entry("2-0", d="b")]])
    assert [(e.id, e.redelivery_count) for e in first.events] == [("1-0", 2), ("2-0", 0)]
    assert (first.newest, first.rung) == ("9-0", "0-0")
    again = h.on_fetch([dealt_reply(), [entry("1-0", d="a"), entry("2-0", d="b")]])
    assert again.events == []  # still pending, already handed out
    h.commit(first.events)
    deal, read, tapped = h.fetch(0.5)
    assert deal.script == "fetch_shared"
    # holds 0; 1: it reads through its tap (its last fetch brought several); block ms
    assert deal.args == ("d", "w#1", 1000, 0, 1, 500, "1-0", "2-0")
    assert read.args == ("XREADGROUP", "GROUP", "d", "w#1", "COUNT", 3, "STREAMS", K.stream, "0")
    # the rest of its room through its tap, if the script dealt it the first new event;
    # never blocking (another consumer may gain room meanwhile)
    assert tapped.args == (
        "XREADGROUP",
        "GROUP",
        "d",
        "w#1",
        "COUNT",
        2,
        "STREAMS",
        K.stream,
        K.tap("d", "w#1"),
        ">",
        ">",
    )
    h.fetch_failed()
    assert h.fetch()[0].args[6:] == ("1-0", "2-0")


def test_shared_fetch_reads_through_its_tap_only_while_busy_and_right_after_the_script() -> None:
    h = handout()
    idle, _read = h.fetch(0.5)  # nothing fetched yet: no tap read asked for (1); idle and
    assert idle.args[4] == 2  # blocking, it may join the waiters (lib/settle.lua)
    h.fetch_failed()
    h.commit(h.on_fetch([dealt_reply(), [entry("1-0", d="a")]]).events)
    assert len(h.fetch(0.5)) == 2  # one event is no batch: still no tap
    h.fetch_failed()
    h.commit(h.on_fetch([dealt_reply(), [entry("2-0", d="a"), entry("3-0", d="b")]]).events)
    deal, _read, tapped = h.fetch(0.5)  # busy: the rest of its room through its tap
    assert deal.args[4] == 1 and tapped.args[4:6] == ("COUNT", 2)
    came = [[K.stream.encode(), [entry("5-0", d="d"), entry("6-0", d="e")]]]
    got = h.on_fetch([dealt_reply(tap=1), [entry("4-0", d="c")], tapped.parse(came)])
    assert [e.id for e in got.events] == ["4-0", "5-0", "6-0"]
    assert not got.waited and not h.tap_open  # no fetch without the script
    assert len(h.fetch(0.5)) == 2  # no room left for a tap: the script and the pending read


def test_an_idle_shared_consumer_waits_in_one_pipeline_once_the_dispatcher_allows_it() -> None:
    h = handout()
    h.on_fetch([dealt_reply(tap=2), []])  # idle, nothing came: its door is open
    assert h.wait_open
    h.commit(h.on_fetch([dealt_reply(tap=2), [entry("1-0", d="a")]]).events)
    join, door, watch, settle, pending = h.fetch(0.5)
    # the acks go in the script, made only while its door is open; none dealt with a count
    assert join.script == "join_shared" and join.args == ("d", "w#1", 500, 0, "1-0")
    assert settle.script == "settle_shared"
    # each read blocks half the time; only a consumer woken to watch reads the channel
    assert door.args == (
        "XREADGROUP",
        "GROUP",
        "d",
        "w#1",
        "COUNT",
        1,
        "BLOCK",
        250,
        "STREAMS",
        K.door("d", "w#1"),
        ">",
    )
    assert watch.args == (
        "XREADGROUP",
        "GROUP",
        "d",
        "w#1",
        "COUNT",
        3,
        "BLOCK",
        250,
        "STREAMS",
        K.stream,
        K.tap("d", "w#1"),
        ">",
        ">",
    )
    assert pending.args[-1] == "0"
    # settle_shared.lua says it watches on, and gives the counts of its pending events
    # (dealt to it while it waited: handed back, say)
    got = h.on_fetch([1, None, None, (2, {"2-0": 1}), [entry("2-0", d="b")]])
    assert [(e.id, e.redelivery_count) for e in got.events] == [("2-0", 1)] and got.waited
    assert h.wait_open and h.stop_waiting() is not None  # it watches on: leaving says so
    assert h.stop_waiting() is None
    h.commit(got.events)
    join, *_reads, pending = h.fetch(0.5)
    assert join.args[-2:] == (1, "2-0")  # dealt with a count: it is dropped with the ack
    # its door was closed: the acks were not made, and go through the dispatcher next (the
    # event, still pending here, is not handed out again)
    assert h.on_fetch([0, None, None, (0, {"2-0": 1}), [entry("2-0", d="b")]]).events == []
    assert not h.wait_open and h.discarded == 0
    deal = h.fetch(0.5)[0]
    assert deal.script == "fetch_shared" and deal.args[6:] == ("2-0",)
    h.on_fetch([dealt_reply(), []])
    assert h.fetch(0.0)[0].script == "fetch_shared"  # and never without blocking


def test_serial_fetch_reads_new_events_through_its_tap_and_keeps_it_while_it_asks() -> None:
    h = SharedHandout(K, "d", "serial", "w#1", window=3, lease_ms=1000)
    _deal, _read, tapped = h.fetch(0.5)
    tap = K.tap("d", "w#1")
    assert tapped.args == (
        "XREADGROUP",
        "GROUP",
        "d",
        "w#1",
        "COUNT",
        3,
        "BLOCK",
        500,
        "STREAMS",
        K.stream,
        tap,
        ">",
        ">",
    )
    assert tapped.parse(ResponseError(f"NOGROUP No such key '{tap}'")) is None  # not opened
    came = [[K.stream.encode(), [entry("1-0", d="a")]]]
    got = h.on_fetch([dealt_reply(tap=1), [], tapped.parse(came)])
    assert [e.id for e in got.events] == ["1-0"] and got.waited and h.tap_open
    h.commit(got.events)
    # the tap is open and nothing is held: the tap renewed and the acks made while it is
    # open (one small script, not the dispatcher), then read
    renew, read = h.fetch(0.5)
    assert renew.script == "ack_tap" and renew.keys == (K.stream, tap, K.redeliveries("d"))
    assert renew.args == ("d", 1500, 0, "1-0") and read.args == tapped.args
    closed = h.on_fetch(
        [False, read.parse(ResponseError("UNBLOCKED the stream key no longer exists"))]
    )
    assert closed.events == [] and closed.waited and not h.tap_open
    deal = h.fetch(0.5)[0]  # the tap was closed: the acks were not made, the dispatcher has them
    assert deal.script == "fetch_serial" and deal.args[6:] == ("1-0",)


def test_a_tap_fetch_drops_the_redelivery_counts_of_the_events_dealt_with_one() -> None:
    h = SharedHandout(K, "d", "serial", "w#1", window=3, lease_ms=1000)
    h.fetch(0.5)
    pending = [entry("1-0", d="a"), entry("2-0", d="b")]
    got = h.on_fetch([dealt_reply([b"1-0", b"1"], tap=1), pending, []])
    assert [(e.id, e.redelivery_count) for e in got.events] == [("1-0", 1), ("2-0", 0)]
    h.commit(got.events)
    renew, _read = h.fetch(0.5)
    assert renew.script == "ack_tap" and renew.args[1:] == (1500, 1, "1-0", "2-0")  # counted first
    h.fetch_failed()  # not sent: through the dispatcher, which drops the counts itself
    deal = h.fetch(0.5)[0]
    assert deal.script == "fetch_serial" and deal.args[-2:] == ("1-0", "2-0")
    h.on_fetch([dealt_reply(tap=1), [], []])  # acknowledged, the count dropped
    _renew, read = h.fetch(0.5)
    came = read.parse([[K.stream.encode(), [entry("3-0", d="c")]]])
    h.commit(h.on_fetch([True, came]).events)
    renew, _read = h.fetch(0.5)
    assert renew.args[1:] == (1500, 0, "3-0")
    h.on_fetch([True, []])
    assert h.fetch(0.5)[0].args == ("PEXPIRE", K.tap("d", "w#1"), 1500)  # no acks: no script


def test_acks_ring_the_bell_only_when_a_fetch_may_wait_for_them() -> None:
    """A full shared window (its own fetch waits for room), a serial line that ends (every
    member's fetch waits while it is held): the bell is named, so the script rings it."""
    entries = [entry("1-0", d="a"), entry("2-0", d="b"), entry("3-0", d="c")]
    bell = K.bell("d")
    h = handout()  # a window of 3
    got = h.on_fetch([dealt_reply(), entries[:2]]).events
    h.commit(got[:1])
    assert bell not in h.flush()[0].keys  # 1 of 3 held: room before and after
    h = handout()
    got = h.on_fetch([dealt_reply(), entries]).events
    h.commit(got[:1])
    assert h.flush()[0].keys[-1] == bell  # full: its fetch may wait for this room
    h.commit(got[1:])
    assert bell not in h.flush()[0].keys  # room already
    s = SharedHandout(K, "d", "serial", "w#1", window=3, lease_ms=1000)
    got = s.on_fetch([dealt_reply(), entries[:2], []]).events
    s.commit(got[:1])
    assert bell not in s.flush()[0].keys  # still holds the line
    s.commit(got[1:])
    assert s.flush()[0].keys[-1] == bell  # the line is free


def test_shared_acks_an_entry_trimmed_while_pending() -> None:
    h = handout()
    assert h.on_fetch([dealt_reply(), [(b"4-0", None)]]).events == []
    assert h.to_ack == ["4-0"]


def test_shared_flush_acks_behind_the_membership_check() -> None:
    h = handout()
    assert h.flush() == []
    h.commit(h.on_fetch([dealt_reply(), [entry("1-0", d="a")]]).events)
    (ack,) = h.flush()
    assert ack.script == "ack_shared" and ack.args == ("d", "w#1", "", 0, "1-0")
    assert ack.keys == (K.stream, K.members("d"), K.redeliveries("d"))  # room: no bell
    assert ack.parse(1) is True and ack.parse(0) is False  # refused: detached meanwhile
    assert ack.parse(-1) is False  # refused: made under an earlier attachment
    token = h.attach().args[5]  # each attachment is named afresh, and acks carry its name
    latest, hashed = h.attach().args[5:]
    assert len(token) == len(latest) == 8 and token != latest
    assert hashed == key_hash("w#1")  # the id's hash, kept for a keyed durable's dealing
    got = h.on_fetch([dealt_reply(), [entry("2-0", d="b")]]).events
    h.commit(got)
    (ack,) = h.flush()
    assert ack.args[2] == latest
    h.commit(got)  # again: acknowledged already, and not sent twice
    assert h.flush() == []


def test_a_consumer_joined_again_as_a_new_member_forgets_what_it_held() -> None:
    h = handout()
    held = h.on_fetch([dealt_reply(), [entry("1-0", d="a"), entry("2-0", d="b")]]).events
    h.commit(held[:1])
    h.on_attach((0, True))  # a member still (an outage within its lease): all kept
    assert h.to_ack == ["1-0"] and h.handed == {"2-0"}
    h.on_attach((0, False))  # detached meanwhile: its events were dealt again
    assert h.to_ack == [] and h.handed == set()
    h.commit(held)
    assert h.flush() == []
    again = h.on_fetch([dealt_reply([b"1-0", b"1"]), [entry("1-0", d="a")]]).events
    assert [e.id for e in again] == ["1-0"]  # dealt back here: new, not a lost ack


def test_shared_notices_another_consumers_store_filter_once() -> None:
    h = SharedHandout(
        K, "d", "shared", "w#1", window=3, lease_ms=1000, selector=compile_filter("a = 1")
    )
    notice = h.on_fetch([dealt_reply(version=2, by=b"w#2"), []]).notice
    assert notice is not None and "w#2" in notice
    assert h.on_fetch([dealt_reply(version=2, by=b"w#2"), []]).notice is None


def test_shared_release_hands_back_what_was_handed_and_not_acked() -> None:
    h = handout()
    events = h.on_fetch([dealt_reply(), [entry("1-0", d="a"), entry("2-0", d="b")]]).events
    (release,) = h.release(unhanded=events[1:])
    assert release.script == "release_shared" and release.args == ("d", "w#1", "1-0")


# -- the session cursors ------------------------------------------------------------------


def test_session_replays_up_to_the_marker_then_reads_live_with_a_block() -> None:
    interests = {"orders": Interest("orders")}
    c = sessions.SessionCursors(
        "ns", "s1", interests, {"orders": "2-0"}, interest_matches, batch=50
    )
    read = c.read(block_ms=200)
    assert "BLOCK" not in read.args and read.args[-1] == "0"
    (batch,) = c.on_read([[K.stream.encode(), [entry("1-0", d="a"), entry("3-0", d="b")]]])
    assert [(e.id, e.replayed) for e in batch.events] == [("1-0", True), ("3-0", False)]
    ack = c.ack(batch)
    assert ack is not None and ack.args == ("XACK", K.stream, "~session:s1", b"1-0", b"3-0")
    c.on_read([])  # history exhausted
    live = c.read(block_ms=200)
    assert live.args[live.args.index("BLOCK") + 1] == 200 and live.args[-1] == ">"
    (idle,) = c.on_read([])
    assert idle.live_first and idle.events == [] and c.ack(idle) is None


def test_a_rolled_back_event_read_again_before_its_rollback_ran_is_not_handed_out() -> None:
    """A read racing a rollback finds the event still pending here, uncounted: it is not
    handed out as new. Remembered for at least RECENT_ACKS rollbacks after it (two
    generations, not one set cleared whole)."""
    ledger = Ledger(K.channel)
    first = ledger.hand_out([entry("1-0", d="x")], {}, [])
    ledger.roll_back([e.id for e in first])
    later = [f"{n}-1" for n in range(2, RECENT_ACKS + 2)]  # as many rollbacks after it
    ledger.hand_out([entry(i, d="x") for i in later], {}, [])
    ledger.roll_back(later)
    assert ledger.hand_out([entry("1-0", d="x")], {}, []) == []  # read before its rollback ran
    again = ledger.hand_out([entry("1-0", d="x")], {"1-0": 1}, [])  # dealt again, counted
    assert [e.id for e in again] == ["1-0"] and again[0].redelivered


def test_a_serial_holder_reads_ahead_half_its_window_and_only_with_a_backlog() -> None:
    """Each read through the tap asks for half the window; the read ahead is the tap's
    read with the acknowledgements so far, never blocking; none goes out when the last
    read took less than it asked for, or when the tap is closed."""
    s = SharedHandout(K, "d", "serial", "w#1", window=READ_AHEAD_WINDOW, lease_ms=1000)
    half = READ_AHEAD_WINDOW // 2
    ops = s.fetch(1.0)
    assert ops[-1].args[ops[-1].args.index("COUNT") + 1] == half
    ids = [f"{n}-0" for n in range(1, half + 1)]
    got = s.on_fetch([dealt_reply(tap=1), [], [entry(i, d="x") for i in ids]]).events
    s.commit(got)
    ahead = s.ahead()
    assert ahead is not None
    renew, read = ahead
    assert renew.script == "ack_tap" and list(renew.args[-half:]) == ids  # the acks so far
    assert "BLOCK" not in read.args and read.args[read.args.index("COUNT") + 1] == half
    more = [f"{n}-0" for n in range(half + 1, half + 4)]  # fewer than asked: no backlog
    handed = s.hand_out(s.took_ahead([1, [entry(i, d="x") for i in more]]))
    assert [e.id for e in handed] == more
    assert s.ahead() is None
    # a rollback names what it keeps: whatever else it holds was read ahead, and goes back
    back = s.rollback(handed[:1], 0.0)
    assert back is not None and back.args[:6] == ("d", "w#1", 0, 1, more[0], "1")
    assert sorted(back.args[6:]) == sorted(more[1:])
