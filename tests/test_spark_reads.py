"""The reader's own steps without a Spark session: stream entries become the source's Arrow
columns (events only, filtered, redelivered up to a mark), and a batch planned under
`trigger(availableNow=True)` stops at the bound even when later events exist."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import durables

pytest.importorskip("pyspark", reason="pyspark is not installed (the spark extra)")

from durables.selector import compile_filter
from durables.spark import store
from durables.spark.columns import entries_batch, id_key
from durables.spark.ranges import FIRST_ID


def test_entries_become_the_source_columns_with_tombstones_and_trimmed_entries_left_out() -> None:
    entries = [
        (b"1700000000000-0", {b"d": b"a", b"k": b"K1", b"p": b'{"n":3,"ok":true,"r":"eu"}'}),
        (b"1700000000000-1", {b"d": b"", b"k": b"K1", b"o": b"destroy"}),  # a tombstone
        (b"1700000000001-0", {}),  # trimmed while pending
        (b"1700000000002-5", [b"d", b"b", b"p", b'{"x":1.5}']),  # as the server sends it
    ]
    batch = entries_batch("orders", entries, None, id_key("1700000000000-0"))
    assert batch is not None
    assert batch.to_pylist() == [
        {"id": "1700000000000-0", "channel": "orders", "key": "K1", "data": b"a",
         "properties": [("n", "3"), ("ok", "true"), ("r", "eu")],
         "timestamp": datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC), "redelivered": True},
        {"id": "1700000000002-5", "channel": "orders", "key": None, "data": b"b",
         "properties": [("x", "1.5")],
         "timestamp": datetime(2023, 11, 14, 22, 13, 20, 2000, tzinfo=UTC),
         "redelivered": False},
    ]  # fmt: skip


def test_a_filter_keeps_only_matching_events_and_none_matching_gives_no_batch() -> None:
    entries = [
        (b"5-0", {b"d": b"a", b"p": b'{"region":"eu"}'}),
        (b"5-1", {b"d": b"b", b"p": b'{"region":"us"}'}),
        (b"6-0", {b"d": b"c"}),
    ]
    batch = entries_batch("c", entries, compile_filter("region = 'eu'"), None)
    assert batch is not None and batch.column("id").to_pylist() == ["5-0"]
    assert batch.column("redelivered").to_pylist() == [False]
    assert entries_batch("c", entries, compile_filter("region = 'asia'"), None) is None


def test_a_batch_planned_under_a_bound_stops_there_though_later_events_exist(
    client: durables.Client,
) -> None:
    channel = client.channel("orders")
    ids = channel.publish_many([durables.Message(f"{i}".encode()) for i in range(10)])
    durable = channel.durable("spark", start="earliest")
    plan = store.plan_batch(durable, FIRST_ID, 100, ids[4])
    assert (plan.end, plan.events) == (ids[4], 5)
    plan = store.plan_batch(durable, plan.end, 3, ids[-1])  # the bound is the newest event
    assert (plan.end, plan.events) == (ids[7], 3)
    plan = store.plan_batch(durable, plan.end, 100, ids[-1])
    assert (plan.end, plan.events) == (ids[9], 2)
    assert durable.transaction_depth() == 10
    store.release(durable)


def test_a_commit_acknowledges_the_planned_ids_up_to_its_end_and_sweeps_the_rest(
    client: durables.Client,
) -> None:
    channel = client.channel("orders")
    channel.publish_many([durables.Message(f"{i}".encode()) for i in range(12)])
    durable = channel.durable("spark", start="earliest")
    first = store.plan_batch(durable, FIRST_ID, 5, None)
    second = store.plan_batch(durable, first.end, 5, None)
    assert len(first.ids) == len(second.ids) == 5
    assert store.ack_upto(durable, first.end, first.ids) == 5
    assert durable.transaction_depth() == 5  # the second batch stays handed out
    store.plan_batch(durable, second.end, 5, None)
    # given only some of the ids (a plan of an earlier run is not known), the sweep
    # acknowledges everything else pending up to the end
    assert store.ack_upto(durable, second.end, second.ids[:2]) == 5
    assert durable.transaction_depth() == 2
    store.release(durable)
