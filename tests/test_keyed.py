"""Keyed durables: the events of one key go to one consumer at a time, in publish order;
different keys go to different consumers in parallel. Each test records who held which
event when (from its delivery to its acknowledgement) and counts what was published,
delivered, lost, duplicated and reordered."""

from __future__ import annotations

import os
import random
import signal
import textwrap
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

import durables
from durables.key_hash import key_hash, owner_of

from .children import first_line, python_child
from .helpers import wait_for

pytestmark = [pytest.mark.on_cluster, pytest.mark.both_clients]

KEYS, PER_KEY = 30, 20


@dataclass
class Held:
    """One delivery: of which event, to whom, from when to when (acknowledged)."""

    key: str
    seq: int
    consumer: str
    redelivered: int
    got: float
    acked: float = 0.0


@dataclass
class Record:
    """Every delivery of a run, in the order the listeners got them."""

    held: list[Held] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    rng: random.Random = field(default_factory=lambda: random.Random(11))

    def listener(self, name: str, pause_s: float = 0.003) -> Callable[[durables.Event], None]:
        def on_event(event: durables.Event) -> None:
            key, seq = event.text.split(":")
            one = Held(key, int(seq), name, event.redelivery_count, time.monotonic())
            with self.lock:
                self.held.append(one)
                pause = self.rng.random() * pause_s
            time.sleep(pause)
            one.acked = time.monotonic()
            event.ack()

        return on_event

    def count(self) -> int:
        with self.lock:
            return len(self.held)

    def check(self, published: dict[str, list[int]]) -> dict[str, set[str]]:
        """Every published event delivered, once, in publish order per key; the deliveries
        of one key never overlap (one holder at a time). Returns the consumers of each key
        and the keys of each consumer."""
        by_key: dict[str, list[Held]] = defaultdict(list)
        for one in self.held:
            by_key[one.key].append(one)
        lost = {k: sorted(set(s) - {h.seq for h in by_key[k]}) for k, s in published.items()}
        assert {k: v for k, v in lost.items() if v} == {}, "lost"
        for key, seqs in published.items():
            got = [h.seq for h in by_key[key]]
            assert got == seqs, f"key {key}: delivered {got}"  # no duplicate, no reordering
            for earlier, later in zip(by_key[key], by_key[key][1:], strict=False):
                assert later.got >= earlier.acked, f"key {key}: {earlier} and {later} overlap"
        keys_of: dict[str, set[str]] = defaultdict(set)
        for one in self.held:
            keys_of[one.consumer].add(one.key)
        return keys_of


def member(consumer: durables.Consumer) -> str:
    """The id the consumer is attached under (its name, host, pid and a token)."""
    return str(consumer.reader.id)  # type: ignore[attr-defined]


def publish_keys(
    channel: durables.Channel, rounds: range, keys: int = KEYS, pause_s: float = 0.0
) -> dict[str, list[int]]:
    """Round `r` publishes `k<n>:<r>` for every key, one batch per round."""
    published: dict[str, list[int]] = defaultdict(list)
    for r in rounds:
        batch = [durables.Message(f"k{n}:{r}", key=f"k{n}") for n in range(keys)]
        channel.publish_many(batch)
        for n in range(keys):
            published[f"k{n}"].append(r)
        time.sleep(pause_s)
    return published


def test_keys_go_to_one_consumer_each_in_order_and_in_parallel(channel: durables.Channel) -> None:
    dur = channel.durable("orders", kind="keyed")
    record = Record()
    subs = [dur.subscribe(record.listener(n), window=5, name=n) for n in ("a", "b", "c")]
    try:
        published = publish_keys(channel, range(PER_KEY))
        assert wait_for(lambda: record.count() >= KEYS * PER_KEY, timeout=60)
        time.sleep(0.2)  # a duplicate would show up by now
    finally:
        for sub in subs:
            sub.close()
    keys_of = record.check(published)
    assert sorted(keys_of) == ["a", "b", "c"]  # every consumer got keys
    assert sum(len(k) for k in keys_of.values()) == KEYS  # each key stayed with one
    assert all(h.redelivered == 0 for h in record.held)
    assert dur.depth() == 0 and dur.transaction_depth() == 0


def test_a_join_and_a_leave_midway_reorder_no_key_and_the_joiner_gets_keys(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("orders", kind="keyed")
    record = Record()
    subs = {n: dur.subscribe(record.listener(n), window=5, name=n) for n in ("a", "b", "c")}
    published: dict[str, list[int]] = defaultdict(list)
    try:
        for part, change in ((range(0, 7), "join"), (range(7, 14), "leave"), (range(14, 20), "")):
            for key, seqs in publish_keys(channel, part, pause_s=0.05).items():
                published[key] += seqs
            if change == "join":
                subs["d"] = dur.subscribe(record.listener("d"), window=5, name="d")
            elif change == "leave":
                subs.pop("a").close()
        assert wait_for(lambda: record.count() >= KEYS * PER_KEY, timeout=60)
        time.sleep(0.2)
    finally:
        for sub in subs.values():
            sub.close()
    keys_of = record.check(published)
    assert keys_of["d"], "the joiner got no key"
    late = {h.key for h in record.held if h.seq >= 15}  # after both changes settled
    assert not {h.key for h in record.held if h.seq >= 15 and h.consumer == "a"}
    assert late == {f"k{n}" for n in range(KEYS)}
    assert dur.depth() == 0 and dur.transaction_depth() == 0


def test_a_key_moves_only_between_two_of_its_events(channel: durables.Channel) -> None:
    """A consumer that joins while an event of a key it would own is out with another
    consumer gets that key's next event only once the first is acknowledged."""
    dur = channel.durable("orders", kind="keyed")
    with dur.consumer("first", prefetch=50, auto_ack=False) as first:
        publish_keys(channel, range(1))  # one event of each key: all to `first`
        held = first.fetch(timeout=2)
        assert len(held) == KEYS
        with dur.consumer("joiner", prefetch=50, auto_ack=False) as joiner:
            publish_keys(channel, range(1, 2))
            # every key is out with `first`: its next event waits, whoever owns it now
            assert joiner.fetch(timeout=0.5) == []
            assert first.fetch(timeout=0.3) == []
            for event in held:
                event.ack()
            first.commit()
            moved = [str(e.key) for e in joiner.fetch(timeout=2)]
            stayed = [str(e.key) for e in first.fetch(timeout=2)]
            members = [member(first), member(joiner)]
            assert sorted(moved + stayed) == sorted(f"k{n}" for n in range(KEYS))
            assert moved and all(owner_of(k, members) == member(joiner) for k in moved)
            assert all(owner_of(k, members) == member(first) for k in stayed)


def test_a_rolled_back_event_comes_again_before_the_later_events_of_its_key(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("orders", kind="keyed")
    with dur.consumer("one", prefetch=10, auto_ack=False) as one:
        publish_keys(channel, range(3), keys=2)  # k0:0 k1:0 k0:1 k1:1 k0:2 k1:2
        got = one.fetch(timeout=2)
        assert [e.text for e in got] == ["k0:0", "k1:0"]  # one event of a key at a time
        got[0].rollback()
        got[1].ack()
        one.commit()
        again = one.fetch(timeout=2)
        assert [(e.text, e.redelivery_count) for e in again] == [("k0:0", 1), ("k1:1", 0)]
        for event in again:
            event.rollback(delay=0.6)  # held back: later events of both keys wait too
        one.commit()
        assert one.fetch(timeout=0.3) == []
        time.sleep(0.4)
        later = [e for e in one.fetch(timeout=2) for _ in [e.ack()]]
        one.commit()
        assert [(e.text, e.redelivery_count) for e in later] == [("k0:0", 2), ("k1:1", 1)]
        rest = [e for e in one.fetch(timeout=2) for _ in [e.ack()]]
        assert sorted(e.text for e in rest) == ["k0:1", "k1:2"]


def test_a_dead_lettered_event_releases_its_key(channel: durables.Channel) -> None:
    dur = channel.durable("orders", kind="keyed", max_deliveries=1)
    with dur.consumer("one", prefetch=10, auto_ack=False) as one:
        publish_keys(channel, range(2), keys=1)
        (first,) = one.fetch(timeout=2)
        first.rollback()
        one.commit()
        (second,) = one.fetch(timeout=2)
        assert (second.text, second.redelivery_count) == ("k0:1", 0)
        assert [d.origin_id for d in dur.dead_letters()] == [first.id]


def test_events_without_a_key_are_dealt_round_robin_beside_the_keyed_ones(
    channel: durables.Channel,
) -> None:
    dur = channel.durable("orders", kind="keyed", filter="keep = true")
    with (
        dur.consumer("one", prefetch=10, auto_ack=True) as one,
        dur.consumer("two", prefetch=10, auto_ack=True) as two,
    ):
        channel.publish_many(
            [durables.Message(f"free{i}", properties={"keep": True}) for i in range(6)]
            + [durables.Message("k0:0", key="k0", properties={"keep": True})]
            + [durables.Message("dropped", key="k0", properties={"keep": False})]
            + [durables.Message("k0:1", key="k0", properties={"keep": True})]
        )
        got_one = [e.text for e in one.fetch(timeout=2)]
        got_two = [e.text for e in two.fetch(timeout=2)]
        got_one += [e.text for e in one.fetch(timeout=1)]
        got_two += [e.text for e in two.fetch(timeout=1)]
    free = [t for t in got_one + got_two if t.startswith("free")]
    assert sorted(free) == [f"free{i}" for i in range(6)]
    assert {t for t in got_one if t.startswith("free")} and {
        t for t in got_two if t.startswith("free")
    }  # both got some: round robin
    keyed = [t for t in got_one + got_two if t.startswith("k0")]
    assert keyed == ["k0:0", "k0:1"] and ("k0:0" in got_one) == ("k0:1" in got_one)


CRASHER = textwrap.dedent(
    """
    import sys, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=1.0,
                              block_s=0.2)
    dur = client.channel("orders").durable("orders", kind="keyed")
    c = dur.consumer("doomed", prefetch=5, auto_ack=False)
    held = []
    while len(held) < 5:
        held += c.fetch(timeout=1)
    print(" ".join(e.text for e in held), flush=True)
    sys.stdin.readline()  # killed here, holding them
    """
)


def test_a_consumer_killed_holding_events_gives_its_keys_back_first_flagged_then_in_order(
    server_url: str, namespace: str, channel: durables.Channel
) -> None:
    """The crashing process uses the sync client; the survivor is the test's client."""
    dur = channel.durable("orders", kind="keyed")
    published = publish_keys(channel, range(4), keys=10)
    with python_child(CRASHER, server_url, namespace) as proc:
        held = first_line(proc).split()
        os.kill(proc.pid, signal.SIGKILL)
    assert held == [f"k{n}:0" for n in range(5)]  # one of each key, in publish order
    record = Record()
    sub = dur.subscribe(record.listener("survivor"), window=3, name="survivor")
    try:
        assert wait_for(lambda: record.count() >= 40, timeout=30)
        time.sleep(0.2)
    finally:
        sub.close()
    record.check(published)
    for key in (f"k{n}" for n in range(5)):
        first, *later = [h for h in record.held if h.key == key]
        assert (first.seq, first.redelivered) == (0, 1)  # the held one again, flagged
        assert [h.redelivered for h in later] == [0, 0, 0]
    assert all(h.redelivered == 0 for h in record.held if h.key >= "k5")


def test_a_consumers_own_filter_takes_the_keys_it_accepts_in_order(
    channel: durables.Channel,
) -> None:
    """A key goes to the highest-scoring consumer whose own filter takes its event: the
    'us' keys all go to the one consumer whose filter takes them, whole and in order.
    (As on a shared durable, the latest consumer's filter is also the durable's store
    filter: it takes both regions here.)"""
    dur = channel.durable("orders", kind="keyed")
    with (
        dur.consumer("eu", prefetch=20, auto_ack=True, filter="region = 'eu'") as eu,
        dur.consumer(
            "any", prefetch=20, auto_ack=True, filter="region = 'eu' OR region = 'us'"
        ) as anyone,
    ):
        channel.publish_many(
            [
                durables.Message(f"{r}{n}:{s}", key=f"{r}{n}", properties={"region": r})
                for s in range(3)
                for n in range(4)
                for r in ("eu", "us")
            ]
        )
        got: dict[str, list[str]] = {"eu": [], "any": []}
        deadline = time.monotonic() + 10
        while len(got["eu"]) + len(got["any"]) < 24 and time.monotonic() < deadline:
            got["eu"] += [e.text for e in eu.fetch(timeout=0.2)]
            got["any"] += [e.text for e in anyone.fetch(timeout=0.2)]
    assert not [t for t in got["eu"] if t.startswith("us")]  # its filter
    for name, texts in got.items():
        for key in {t.split(":")[0] for t in texts}:
            mine = [t for t in texts if t.startswith(key + ":")]
            assert mine == [f"{key}:{s}" for s in range(3)], (name, key)  # whole and in order
    assert sorted(got["eu"] + got["any"]) == sorted(
        f"{r}{n}:{s}" for s in range(3) for n in range(4) for r in ("eu", "us")
    )


def test_the_key_hash_the_server_deals_by_is_the_librarys(channel: durables.Channel) -> None:
    """Each key's events went to the consumer `owner_of` names: the Lua and the Python
    hash agree (checked over 200 keys, and long ones: the server reads a key's bytes 64 at
    a time, and keeps each consumer id's hash from its attachment)."""
    dur = channel.durable("orders", kind="keyed")
    with (
        dur.consumer("one", prefetch=500, auto_ack=False) as one,
        dur.consumer("two", prefetch=500, auto_ack=False) as two,
        dur.consumer("three", prefetch=500, auto_ack=False) as three,
    ):
        long = ["a" * 63, "b" * 64, "c" * 65, "d" * 128, "é" * 70, "order-" + "7" * 300]
        keys = [f"k{n}" for n in range(200)] + long
        channel.publish_many([durables.Message(f"{key}:0", key=key) for key in keys])
        members = [member(c) for c in (one, two, three)]
        for consumer in (one, two, three):
            for event in consumer.fetch(timeout=2):
                assert event.key is not None
                assert owner_of(event.key, members) == member(consumer)
                keys.remove(event.key)
                event.ack()
            consumer.commit()
    assert keys == [] and dur.depth() == 0
    assert key_hash("k0") != key_hash("k1") and 0 <= key_hash("é") < 2**26
