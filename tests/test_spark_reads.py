"""The reader's own steps without a Spark session: stream entries become the source's Arrow
columns (events only, filtered, redelivered up to a mark), and a batch planned under
`trigger(availableNow=True)` stops at the bound even when later events exist."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

import durables

pytest.importorskip("pyspark", reason="pyspark is not installed (the spark extra)")

from durables.ids import previous
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
        {
            "id": "1700000000000-0",
            "channel": "orders",
            "key": "K1",
            "data": b"a",
            "properties": [("n", "3"), ("ok", "true"), ("r", "eu")],
            "timestamp": datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC),
            "redelivered": True,
        },
        {
            "id": "1700000000002-5",
            "channel": "orders",
            "key": None,
            "data": b"b",
            "properties": [("x", "1.5")],
            "timestamp": datetime(2023, 11, 14, 22, 13, 20, 2000, tzinfo=UTC),
            "redelivered": False,
        },
    ]


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


def group_of(client: durables.Client, durable: durables.Durable) -> dict[str, Any]:
    groups = client.redis.xinfo_groups(client.keys(durable.channel_name).stream)
    return next(g for g in groups if g["name"].decode() == durable.name)


def test_a_planned_batch_enters_no_pending_list_yet_counts_as_handed_out_until_committed(
    client: durables.Client,
) -> None:
    channel = client.channel("orders")
    ids = channel.publish_many([durables.Message(f"{i}".encode()) for i in range(12)])
    durable = channel.durable("spark", start="earliest")
    first = store.plan_batch(durable, FIRST_ID, 5, None)
    second = store.plan_batch(durable, first.end, 5, None)
    assert (first.end, second.end) == (ids[4], ids[9])
    group = group_of(client, durable)
    assert group["pending"] == 0  # no pending entry per event: the cost a plan no longer has
    assert group["last-delivered-id"].decode() == FIRST_ID
    assert (durable.depth(), durable.transaction_depth()) == (2, 10)
    assert store.ack_upto(durable, first.end) == 5
    group = group_of(client, durable)
    assert group["last-delivered-id"].decode() == ids[4]
    assert (group["entries-read"], group["lag"]) == (5, 7)  # the lag stays exact
    assert (durable.depth(), durable.transaction_depth()) == (2, 5)  # the second batch
    assert store.ack_upto(durable, second.end) == 5
    assert (durable.depth(), durable.transaction_depth()) == (2, 0)
    store.release(durable)


def test_a_batch_planned_again_after_a_restart_is_the_same_and_counted_once(
    client: durables.Client,
) -> None:
    channel = client.channel("orders")
    ids = channel.publish_many([durables.Message(f"{i}".encode()) for i in range(12)])
    durable = channel.durable("spark", start="earliest", filter="n > 0 OR n IS NULL")
    first = store.plan_batch(durable, FIRST_ID, 5, None)
    store.plan_batch(durable, first.end, 5, None)  # planned, then the driver died
    assert store.position(durable) == FIRST_ID  # a new query starts where commits left it
    again = store.plan_batch(durable, FIRST_ID, 5, None)
    assert (again.end, again.events, again.handed_out_before) == (ids[4], 5, ids[9])
    assert (durable.depth(), durable.transaction_depth()) == (7, 5)  # filtered: counted
    store.ack_upto(durable, again.end)
    assert (durable.depth(), durable.transaction_depth()) == (7, 0)
    store.release(durable)


def test_retention_keeps_a_planned_batch_until_it_is_committed(client: durables.Client) -> None:
    channel = client.channel("orders")
    ids = channel.publish_many([durables.Message(f"{i}".encode()) for i in range(10)])
    durable = channel.durable("spark", start="earliest")
    plan = store.plan_batch(durable, FIRST_ID, 6, None)
    client.housekeep()
    assert channel.info().length == 10
    store.ack_upto(durable, plan.end)
    client.housekeep()
    assert (channel.info().length, channel.info().first_id) == (4, ids[6])
    store.release(durable)


def test_a_commit_acknowledges_events_handed_out_before_the_query_began(
    client: durables.Client,
) -> None:
    channel = client.channel("orders")
    ids = channel.publish_many([durables.Message(f"{i}".encode()) for i in range(8)])
    durable = channel.durable("spark", start="earliest")
    stream = client.keys("orders").stream
    client.redis.xreadgroup("spark", "someone", {stream: ">"}, count=3)  # held, never acked
    start = store.position(durable)
    assert start == previous(ids[0])  # before the first event still held
    plan = store.plan_batch(durable, start, 5, None)
    assert (plan.end, plan.events, plan.handed_out_before) == (ids[4], 5, ids[2])
    assert (durable.depth(), durable.transaction_depth()) == (3, 5)  # 3 held + 2 planned
    assert store.ack_upto(durable, plan.end) == 5
    assert (durable.depth(), durable.transaction_depth()) == (3, 0)
    assert group_of(client, durable)["lag"] == 3
    store.release(durable)


def test_a_durable_deleted_and_made_again_forgets_the_batches_planned_over_it(
    client: durables.Client,
) -> None:
    channel = client.channel("orders")
    channel.publish_many([durables.Message(f"{i}".encode()) for i in range(10)])
    durable = channel.durable("spark", start="earliest")
    store.plan_batch(durable, FIRST_ID, 6, None)
    store.release(durable)
    durable.delete()
    again = channel.durable("spark", start="earliest")
    assert (again.depth(), again.transaction_depth()) == (10, 0)


def test_the_console_and_metrics_count_a_planned_batch_as_handed_out(
    client: durables.Client,
) -> None:
    from durables import metrics

    channel = client.channel("orders")
    channel.publish_many([durables.Message(f"{i}".encode()) for i in range(10)])
    durable = channel.durable("spark", start="earliest")
    plan = store.plan_batch(durable, FIRST_ID, 6, None)
    time.sleep(0.3)
    (found,) = client.figures().channels[0].durables
    assert (found.info.depth, found.info.transaction_depth, found.lag) == (4, 6, 4)
    assert 0.3 <= found.oldest_unacked_age_s < 30
    (sample,) = metrics.snapshot(client).channels[0].durables  # the same one read
    assert (sample.info.depth, sample.info.transaction_depth) == (4, 6)
    assert 0.3 <= sample.oldest_unacked_age_s < 30
    store.ack_upto(durable, plan.end)
    (found,) = client.figures().channels[0].durables
    assert (found.lag, found.acknowledged) == (4, 6)
    assert 0.3 <= found.oldest_unacked_age_s < 30  # the 4 not handed out yet are as old
    store.release(durable)
