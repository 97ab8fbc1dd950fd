"""A local Spark for the Spark tests, and the query they run: channel `in` through a
durable, a transformation, then channel `out`.

Run as a program (`python -m tests.spark_support URL NAMESPACE CHECKPOINT`), it is a
Spark driver of its own that runs the query until it is killed: the crash tests kill
it with kill -9.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    import durables

IN, OUT, DURABLE = "in", "out", "spark"


def start_spark() -> SparkSession:
    """local[2] (the CI machine has two cores, shared with other work), no UI, quiet."""
    from pyspark.sql import SparkSession

    import durables.spark

    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors run this venv's Python
    session = (
        SparkSession.builder.master("local[2]")
        .appName("durables-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    durables.spark.register(session)
    return session


def source(spark: SparkSession, url: str, namespace: str, **options: str) -> DataFrame:
    reader = spark.readStream.format("durables").option("url", url)
    reader = reader.option("namespace", namespace).option("channel", IN).option("durable", DURABLE)
    return reader.options(**options).load()


def start_query(
    spark: SparkSession,
    url: str,
    namespace: str,
    checkpoint: str,
    *,
    max_events: int = 1000,
    available_now: bool = True,
) -> StreamingQuery:
    """in -> upper-cased payload, the source id kept as a property -> out."""
    from pyspark.sql import functions as F

    events = source(spark, url, namespace, maxEventsPerTrigger=str(max_events))
    enriched = events.select(
        F.upper(F.col("data").cast("string")).alias("data"),
        "key",
        F.map_concat("properties", F.create_map(F.lit("source_id"), F.col("id"))).alias(
            "properties"
        ),
    )
    writer = enriched.writeStream.format("durables").option("url", url)
    writer = writer.option("namespace", namespace).option("channel", OUT)
    writer = writer.option("checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="0 seconds")
    return writer.start()


def run_to_end(spark: SparkSession, url: str, namespace: str, checkpoint: str) -> list[Any]:
    """Run the query until it has read what the channel holds now; its progress reports."""
    query = start_query(spark, url, namespace, checkpoint)
    query.awaitTermination(180)
    if query.isActive:
        query.stop()
        raise AssertionError("the query did not finish within 180 s")
    if query.exception() is not None:
        raise AssertionError(f"the query failed: {query.exception()}")
    return list(query.recentProgress)


def published(client: durables.Client, channel: str) -> list[durables.Event]:
    """Every event the channel holds, in order (read as a plain range, acknowledging nothing)."""
    from durables.events import event_from_entry

    entries = client.redis.xrange(client.keys(channel).stream) or []
    events = [event_from_entry(channel, entry) for entry in entries]
    return [e for e in events if e is not None]


def main() -> None:
    url, namespace, checkpoint = sys.argv[1:4]
    spark = start_spark()
    query = start_query(spark, url, namespace, checkpoint, max_events=500, available_now=False)
    print("started", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main()
