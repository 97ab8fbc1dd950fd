"""A durable read by Spark, transformed and written to another channel: every event once.

Real local[2] Spark, a real server; the crash tests kill a Spark driver of their own
with kill -9 and restart the query on its checkpoint in the shared session.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import durables

from .spark_support import DURABLE, IN, OUT, published, run_to_end, start_query

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent


def publish(client: durables.Client, count: int, first: int = 0) -> list[str]:
    """`count` events e<i> with a key and properties; their ids."""
    messages = [
        durables.Message(f"e{i}", key=f"k{i % 5}", properties={"n": i, "region": "eu"})
        for i in range(first, first + count)
    ]
    return client.channel(IN).publish_many(messages)


def source_ids(client: durables.Client) -> list[str]:
    """The input id each output event came from, in output order."""
    return [str(e.properties["source_id"]) for e in published(client, OUT)]


def test_ten_thousand_events_pass_through_once_in_order_and_are_acknowledged(
    spark: SparkSession, server_url: str, namespace: str, client: durables.Client, tmp_path: Path
) -> None:
    client.channel(OUT)
    ids = publish(client, 10_000)
    query = start_query(spark, server_url, namespace, str(tmp_path / "ck"), max_events=2500)
    query.awaitTermination(180)
    assert query.exception() is None
    out = published(client, OUT)
    assert len(out) == 10_000
    assert source_ids(client) == ids  # batches in order, and tasks in partition order
    assert [e.text for e in out[:2]] == ["E0", "E1"]
    assert out[7].key == "k2" and out[7].properties["n"] == "7"
    durable = client.channel(IN).get_durable(DURABLE)
    assert durable.depth() == 0
    assert durable.transaction_depth() <= 2500  # the last batch: Spark commits it later


def test_driver_killed_mid_run_loses_nothing_and_writes_nothing_twice(
    spark: SparkSession, server_url: str, namespace: str, client: durables.Client, tmp_path: Path
) -> None:
    client.channel(OUT)
    ids = publish(client, 6000)
    checkpoint = str(tmp_path / "ck")
    driver = subprocess.Popen(
        [sys.executable, "-m", "tests.spark_support", server_url, namespace, checkpoint],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its JVM and Python workers share its process group
    )
    try:
        deadline = time.monotonic() + 120
        while client.channel(OUT).info().length < 1000:
            assert driver.poll() is None, "the Spark driver exited by itself"
            assert time.monotonic() < deadline, "the Spark driver wrote nothing in 120 s"
            time.sleep(0.2)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    written = client.channel(OUT).info().length
    assert 0 < written < 6000, "killed mid-run"
    run_to_end(spark, server_url, namespace, checkpoint)
    assert sorted(source_ids(client)) == sorted(ids)  # nothing lost, nothing twice
    assert client.channel(IN).get_durable(DURABLE).depth() == 0


def test_a_batch_whose_commit_log_entry_is_lost_is_not_written_twice(
    spark: SparkSession, server_url: str, namespace: str, client: durables.Client, tmp_path: Path
) -> None:
    client.channel(OUT)
    ids = publish(client, 3000)
    checkpoint = tmp_path / "ck"
    first = run_to_end(spark, server_url, namespace, str(checkpoint))
    last_batch = max(p["batchId"] for p in first if p["numInputRows"])
    for lost in (str(last_batch), f".{last_batch}.crc"):  # as if Spark died before writing it
        (checkpoint / "commits" / lost).unlink()
    again = run_to_end(spark, server_url, namespace, str(checkpoint))
    rerun = [p for p in again if p["batchId"] == last_batch]
    assert rerun and rerun[0]["numInputRows"] > 0, "Spark ran the batch again"
    assert source_ids(client) == ids


def test_a_restart_without_new_events_writes_nothing_and_new_events_flow_on(
    spark: SparkSession, server_url: str, namespace: str, client: durables.Client, tmp_path: Path
) -> None:
    client.channel(OUT)
    ids = publish(client, 500)
    checkpoint = str(tmp_path / "ck")
    run_to_end(spark, server_url, namespace, checkpoint)
    assert source_ids(client) == ids
    idle = run_to_end(spark, server_url, namespace, checkpoint)
    assert sum(p["numInputRows"] for p in idle) == 0
    assert source_ids(client) == ids
    more = publish(client, 300, first=500)
    run_to_end(spark, server_url, namespace, checkpoint)
    assert source_ids(client) == ids + more
    durable = client.channel(IN).get_durable(DURABLE)
    assert durable.depth() == 0
    assert durable.transaction_depth() <= 300
