"""The run checker counts each fault right, on hand-made runs and under concurrent recording."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from durables import Event

from .checker import Checker, Report


def published(*tokens: str) -> Checker:
    """A checker where each token was published and confirmed as `1-<n>`, n from 1."""
    checker = Checker()
    for n, token in enumerate(tokens, 1):
        checker.attempt(token)
        checker.confirm(token, f"1-{n}")
    return checker


def test_a_clean_run_counts_nothing_wrong() -> None:
    checker = published("a", "b", "c")
    for n, token in enumerate("abc", 1):
        checker.deliver("c1", token, f"1-{n}")
    report = checker.report()
    assert report == Report(
        attempted=3,
        confirmed=3,
        delivered=3,
        lost=0,
        duplicated=0,
        duplicated_flagged=0,
        reordered=0,
        unexpected=0,
        republished=0,
    )
    assert report.ok
    assert str(report) == (
        "attempted=3 confirmed=3 delivered=3 lost=0 duplicated=0 (flagged 0) "
        "reordered=0 unexpected=0 republished=0"
    )


def test_a_confirmed_event_never_delivered_is_lost() -> None:
    checker = published("a", "b", "c")
    checker.deliver("c1", "a", "1-1")
    checker.deliver("c1", "c", "1-3")
    report = checker.report()
    assert (report.lost, report.ok) == (1, False)
    assert "lost: 'b'" in checker.explain()


def test_a_publish_in_doubt_is_neither_lost_nor_unexpected() -> None:
    checker = published("a")
    checker.attempt("stored")  # its reply was lost, but the server stored it
    checker.attempt("dropped")  # never stored
    checker.deliver("c1", "a", "1-1")
    checker.deliver("c1", "stored", "1-2")
    report = checker.report()
    assert (report.attempted, report.confirmed, report.delivered) == (3, 1, 2)
    assert (report.lost, report.unexpected) == (0, 0)
    assert report.ok


def test_duplicates_are_counted_flagged_or_not() -> None:
    checker = published("a", "b")
    checker.deliver("c1", "a", "1-1")
    checker.deliver("c1", "b", "1-2")
    checker.deliver("c2", "a", "1-1", redelivered=True)
    checker.deliver("c1", "b", "1-2")  # a second delivery that does not say so
    checker.deliver("c1", "b", "1-2", redelivered=True)
    report = checker.report()
    assert (report.delivered, report.duplicated, report.duplicated_flagged) == (5, 3, 2)
    assert report.lost == 0 and not report.ok
    assert "unflagged duplicates: 'b' as 1-2 to c1\n" in checker.explain() + "\n"


def test_a_flagged_first_delivery_is_no_duplicate() -> None:
    checker = published("a")
    checker.deliver("c1", "a", "1-1", redelivered=True)  # the first one died unrecorded
    assert checker.report().duplicated == 0


def test_reordering_is_counted_per_consumer_on_first_deliveries() -> None:
    checker = published("a", "b", "c", "d", "e")
    checker.deliver("c1", "a", "1-1")
    checker.deliver("c1", "c", "1-3")
    checker.deliver("c1", "b", "1-2")  # below 1-3: reordered
    checker.deliver("c2", "d", "1-4")  # another consumer: its own order
    checker.deliver("c2", "e", "1-5")
    checker.deliver("c2", "a", "1-1", redelivered=True)  # a redelivery: out of order by design
    report = checker.report()
    assert (report.reordered, report.duplicated, report.duplicated_flagged) == (1, 1, 1)
    assert "reordered: 'b' as 1-2 to c1" in checker.explain()


def test_reordering_compares_ids_as_numbers() -> None:
    checker = Checker()
    for token, event_id in (("a", "9-0"), ("b", "10-0"), ("c", "10-2"), ("d", "10-10")):
        checker.attempt(token)
        checker.confirm(token, event_id)
        checker.deliver("c1", token, event_id)
    assert checker.report().reordered == 0


def test_an_order_scope_checks_order_per_key_across_consumers() -> None:
    checker = published("k1-a", "k2-a", "k1-b", "k2-b")
    # a serial durable: each key in order, keys interleaved freely, any consumer
    checker.deliver("c1", "k2-a", "1-2", order_scope="k2")
    checker.deliver("c2", "k1-a", "1-1", order_scope="k1")
    checker.deliver("c2", "k2-b", "1-4", order_scope="k2")
    checker.deliver("c1", "k1-b", "1-3", order_scope="k1")
    assert checker.report().reordered == 0
    late = published("k1-a", "k1-b")
    late.deliver("c1", "k1-b", "1-2", order_scope="k1")
    late.deliver("c2", "k1-a", "1-1", order_scope="k1")
    assert late.report().reordered == 1


def test_a_delivery_nobody_published_is_unexpected() -> None:
    checker = published("a")
    checker.deliver("c1", "a", "1-1")
    checker.deliver("c1", "ghost", "1-2")
    checker.deliver("c2", "ghost", "1-2", redelivered=True)
    report = checker.report()
    assert (report.unexpected, report.lost) == (1, 0)
    assert "unexpected: 'ghost'" in checker.explain()


def test_a_token_stored_twice_is_republished_and_an_unflagged_duplicate() -> None:
    checker = published("a")
    checker.attempt("a")  # retried after a lost reply: stored again
    checker.confirm("a", "1-2")
    checker.deliver("c1", "a", "1-1")
    checker.deliver("c1", "a", "1-2")
    report = checker.report()
    assert (report.attempted, report.confirmed, report.republished) == (2, 1, 1)
    assert (report.duplicated, report.duplicated_flagged) == (1, 0)


def test_ids_are_normalised() -> None:
    checker = Checker()
    checker.attempt("a")
    checker.confirm("a", "5")
    checker.deliver("c1", "a", "5-0")
    assert checker.report().republished == 0
    assert checker.deliveries()[0].event_id == "5-0"


def test_events_are_recorded_by_their_text() -> None:
    checker = published("a", "b")
    checker.deliver_event("c1", Event(id="1-1", channel="orders", data=b"a"))
    checker.deliver_event("c1", Event(id="1-2", channel="orders", data=b"b", redelivery_count=2))
    delivered = checker.deliveries()
    assert [(d.token, d.redelivered) for d in delivered] == [("a", False), ("b", True)]


def test_publish_confirms_or_leaves_in_doubt() -> None:
    checker = Checker()
    assert checker.publish("a", lambda: "1-1") == "1-1"

    def lost_reply() -> str:
        raise redis.ConnectionError("reset")

    def bug() -> str:
        raise KeyError("not a connection fault")

    assert checker.publish("b", lost_reply) is None
    with pytest.raises(KeyError):
        checker.publish("c", bug)
    report = checker.report()
    assert (report.attempted, report.confirmed) == (3, 1)


def test_explain_shows_at_most_the_limit() -> None:
    checker = published(*(f"t{i}" for i in range(8)))
    text = checker.explain(limit=3)
    assert "lost: 't0', 't1', 't2', ... 5 more" in text


def test_concurrent_recording_loses_nothing() -> None:
    threads, per_thread = 8, 2_000
    checker = Checker()
    reports: list[Report] = []
    start = threading.Barrier(threads + 1)

    def run(n: int) -> None:
        start.wait(5.0)
        for i in range(per_thread):
            token, event_id = f"{n}:{i}", f"{n + 1}-{i}"
            checker.attempt(token)
            checker.confirm(token, event_id)
            checker.deliver(f"c{n}", token, event_id)
            if i % 2 == 0:
                checker.deliver(f"c{(n + 1) % threads}", token, event_id, redelivered=True)

    def watch() -> None:  # reports while recording goes on must not fail
        start.wait(5.0)
        for _ in range(20):
            reports.append(checker.report())

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    workers.append(threading.Thread(target=watch))
    started = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join(10.0)
    assert not any(w.is_alive() for w in workers)
    assert len(reports) == 20
    total = threads * per_thread
    report = checker.report()
    assert (report.attempted, report.confirmed) == (total, total)
    assert report.delivered == total + total // 2
    assert report.duplicated == report.duplicated_flagged == total // 2
    assert (report.lost, report.reordered, report.unexpected, report.republished) == (0, 0, 0, 0)
    assert time.monotonic() - started < 10.0
