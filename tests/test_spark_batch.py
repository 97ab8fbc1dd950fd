"""Batch reads and writes of format `durables`, and what a stream keeps of a durable."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import durables

from .children import once_free
from .spark_support import DURABLE, IN, OUT, published, run_to_end, source

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_importing_durables_leaves_pyspark_alone() -> None:
    code = "import sys, durables, durables_cli.main; assert 'pyspark' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def spread(client: durables.Client, count: int, slices: int) -> list[str]:
    """`count` events published in `slices` bursts a few milliseconds apart; their ids."""
    ids: list[str] = []
    per = count // slices
    for s in range(slices):
        messages = [durables.Message(f"e{i}") for i in range(s * per, (s + 1) * per)]
        ids += client.channel(IN).publish_many(messages)
        time.sleep(0.01)
    return ids


@pytest.mark.slow
def test_a_batch_read_returns_the_retained_events_in_id_range_tasks(
    spark: SparkSession, server_url: str, namespace: str, client: durables.Client
) -> None:
    ids = spread(client, 3000, 3)
    reader = spark.read.format("durables").option("url", server_url)
    reader = reader.option("namespace", namespace).option("channel", IN)
    frame = reader.option("numPartitions", "3").load()
    assert frame.rdd.getNumPartitions() == 3
    rows = frame.collect()
    assert [r["id"] for r in rows] == ids
    assert bytes(rows[5]["data"]) == b"e5" and rows[5]["channel"] == IN
    assert not any(r["redelivered"] for r in rows)
    assert round(rows[5]["timestamp"].timestamp() * 1000) == int(ids[5].split("-")[0])
    part = reader.option("startId", ids[10]).option("endId", ids[2500]).load()
    assert [r["id"] for r in part.collect()] == ids[10:2501]


@pytest.mark.slow
def test_a_batch_write_publishes_every_row_in_order(
    spark: SparkSession, server_url: str, namespace: str, client: durables.Client
) -> None:
    rows = [(f"row {i}", f"k{i % 3}", {"n": str(i)}) for i in range(1000)]
    frame = spark.createDataFrame(rows, "data string, key string, properties map<string,string>")
    writer = frame.repartition(1).write.format("durables").option("url", server_url)
    writer.option("namespace", namespace).option("channel", OUT).mode("append").save()
    out = published(client, OUT)
    assert [(e.text, e.key, e.properties) for e in out] == rows


@pytest.mark.slow
def test_a_stream_over_a_shared_durable_keeps_its_filter(
    spark: SparkSession, server_url: str, namespace: str, client: durables.Client, tmp_path: Path
) -> None:
    channel = client.channel(IN)
    durable = channel.durable(DURABLE, kind="shared", filter="region = 'eu'")
    client.channel(OUT)
    channel.publish_many(
        durables.Message(f"e{i}", properties={"region": "eu" if i % 3 else "us"})
        for i in range(300)
    )
    run_to_end(spark, server_url, namespace, str(tmp_path / "ck"))
    assert [e.text for e in published(client, OUT)] == [f"E{i}" for i in range(300) if i % 3]
    assert durable.depth() == 0
    assert channel.get_durable(DURABLE).kind == "shared"


@pytest.mark.slow
def test_a_stream_holds_an_exclusive_durable_while_it_runs_and_lets_go_after(
    spark: SparkSession, server_url: str, namespace: str, client: durables.Client, tmp_path: Path
) -> None:
    client.channel(IN).publish_many([durables.Message(f"e{i}") for i in range(100)])
    client.channel(OUT)
    run_to_end(spark, server_url, namespace, str(tmp_path / "ck"))
    durable = client.channel(IN).get_durable(DURABLE)
    with pytest.raises(durables.DurableInUseError, match="spark"):
        durable.consumer("while-spark-holds")  # right after the query, its lease holds
    lease_s = durables.Settings().lease_timeout_s  # the query's client: default settings
    consumer = once_free(
        lambda: durable.consumer("after-spark"), durables.DurableInUseError, timeout=lease_s + 10
    )
    with consumer:  # the last batch, which Spark had not committed yet, comes again
        assert 0 < len(consumer.fetch(timeout=1.0)) <= 100


@pytest.mark.slow
def test_a_stream_refuses_a_shared_durable_that_has_consumers_attached(
    spark: SparkSession, server_url: str, namespace: str, client: durables.Client, tmp_path: Path
) -> None:
    channel = client.channel(IN)
    channel.publish(b"x")
    durable = channel.durable(DURABLE, kind="shared")
    with durable.consumer("busy", prefetch=10):
        query = source(spark, server_url, namespace).writeStream.format("noop")
        started = query.option("checkpointLocation", str(tmp_path / "ck")).start()
        with pytest.raises(Exception, match="DurableInUseError") as failed:
            started.awaitTermination(60)
        error = str(failed.value)
    assert "already held by consumer busy" in error
    assert "redis/" not in error  # the durables error alone, not redis-py's frames
