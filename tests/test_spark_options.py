"""Bad options stop a Spark query at its start with one durables error a person can act on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import durables

from .servers import free_port
from .spark_support import IN, source

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.slow


def failure(start: Callable[[], Any]) -> str:
    """The message a user sees when a query fails to start (or fails at its first batch)."""
    try:
        query = start()
        query.awaitTermination(60)
        error = query.exception()
        query.stop()
    except Exception as exc:  # Spark wraps the Python error: AnalysisException and kin
        return str(exc)
    assert error is not None, "the query started and ran"
    return str(error)


def to_sink(frame: DataFrame, url: str, namespace: str, checkpoint: Path) -> Any:
    writer = frame.writeStream.format("durables").option("url", url)
    writer = writer.option("namespace", namespace).option("channel", "out")
    return writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()


def test_a_stream_without_a_channel_is_refused_naming_the_option(
    spark: SparkSession, server_url: str, namespace: str, tmp_path: Path
) -> None:
    def start() -> Any:
        frame = spark.readStream.format("durables").option("url", server_url).load()
        return frame.writeStream.format("console").start()

    message = failure(start)
    assert "ConfigError: format durables needs option channel" in message


def test_an_unknown_durable_kind_is_refused(
    spark: SparkSession, server_url: str, namespace: str, tmp_path: Path
) -> None:
    frame = source(spark, server_url, namespace, kind="fanout")
    message = failure(lambda: to_sink(frame, server_url, namespace, tmp_path / "ck"))
    assert "ConfigError: option kind must be one of exclusive, shared, serial" in message


def test_an_unreachable_server_is_reported_at_start(
    spark: SparkSession, namespace: str, tmp_path: Path
) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    frame = source(spark, url, namespace)
    message = failure(lambda: frame.writeStream.format("console").start())
    assert "ConnectionLostError: cannot reach" in message


def test_a_sink_column_of_the_wrong_type_is_refused_before_any_task(
    spark: SparkSession, server_url: str, namespace: str, client: durables.Client, tmp_path: Path
) -> None:
    client.channel(IN).publish(b"x")
    frame = source(spark, server_url, namespace).selectExpr("length(data) AS data")
    message = failure(lambda: to_sink(frame, server_url, namespace, tmp_path / "ck"))
    assert "ConfigError: the durables sink's column data must be binary or string" in message
    assert "Lost task" not in message  # refused on the driver, before any task ran
    assert client.channel("out").info().length == 0
    durable = client.channel(IN).get_durable("spark")
    assert (durable.depth(), durable.transaction_depth()) == (0, 1)  # planned, not lost
