"""Spark support: the `durables` format for `spark.read`, `spark.readStream`, `df.write`
and `df.writeStream` (install the `spark` extra: `pip install 'durables[spark]'`).

    import durables.spark
    durables.spark.register(spark)
    events = (spark.readStream.format("durables").option("url", url)
              .option("channel", "orders").option("durable", "spark-orders").load())

Importing `durables` never imports pyspark; importing this package does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .datasource import DurablesDataSource
from .reporting import SinkCommitError
from .schema import SOURCE_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SOURCE_SCHEMA", "DurablesDataSource", "SinkCommitError", "register"]


def register(spark: SparkSession) -> None:
    """Make format `durables` known to `spark` (once per session)."""
    spark.dataSource.register(DurablesDataSource)
