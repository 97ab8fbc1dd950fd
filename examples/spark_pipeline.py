"""A Spark pipeline: orders -> Spark (enrich, then total per region) -> order-totals.

    python examples/spark_pipeline.py [--url redis://127.0.0.1:6379/0] [--count 200]

Three steps, as three programs would do them:

1. a producer publishes `--count` orders (JSON, with a `region` property) to `orders`;
2. a Spark job reads them through the durable `spark-totals`, adds each order's amount
   (qty x price), totals the orders and amounts per region and publishes the totals to
   `order-totals` (keyed by region) after each micro-batch, and stops once caught up;
3. a consumer of the durable `printer` on `order-totals` prints the latest total of
   each region.

Run it again: the job goes on from its checkpoint, so only new orders count again.
With no URL the embedded server is used. Needs the spark extra (pyspark and Java 17).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import durables

REGIONS = ("eu", "us", "apac")


def order(i: int) -> dict[str, object]:
    """The i-th order: its region, quantity and unit price follow from i."""
    return {"order": i, "region": REGIONS[i % 3], "qty": 1 + i % 4, "price": 2.5 + i % 5}


def produce(client: durables.Client, count: int) -> None:
    orders = client.channel("orders")
    client.channel("order-totals").durable("printer")  # before the job: it sees every total
    messages = (
        durables.Message(order(i), key=f"order-{i}", properties={"region": REGIONS[i % 3]})
        for i in range(count)
    )
    ids = orders.publish_many(messages)
    print(f"published {len(ids)} orders")


def run_job(url: str, namespace: str, checkpoint: str) -> None:
    """Orders in, one total per region out, until the job has caught up with `orders`."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import durables.spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors: this Python
    builder = SparkSession.builder.appName("durables-order-totals")
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: run locally
        builder = builder.master("local[2]").config("spark.ui.enabled", "false")
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    spark = builder.config("spark.sql.shuffle.partitions", "2").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    durables.spark.register(spark)

    fields = "order long, region string, qty int, price double"
    orders = (
        spark.readStream.format("durables")
        .option("url", url)
        .option("namespace", namespace)
        .option("channel", "orders")
        .option("durable", "spark-totals")
        .load()
        .select(F.from_json(F.col("data").cast("string"), fields).alias("o"))
        .select("o.*")
        .withColumn("amount", F.col("qty") * F.col("price"))  # enrich
    )
    totals = orders.groupBy("region").agg(
        F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("amount")
    )
    query = (
        totals.select(
            F.to_json(F.struct("region", "orders", "amount")).alias("data"),
            F.col("region").alias("key"),
        )
        .writeStream.format("durables")
        .option("url", url)
        .option("namespace", namespace)
        .option("channel", "order-totals")
        .option("checkpointLocation", checkpoint)
        .outputMode("complete")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


def print_totals(client: durables.Client) -> None:
    """The latest total of each region, from the durable `printer`."""
    latest: dict[str, dict[str, object]] = {}
    with client.channel("order-totals").durable("printer").consumer() as consumer:
        while events := consumer.fetch(timeout=1.0):
            for event in events:
                latest[str(event.key)] = event.json()
    for region in sorted(latest):
        total = latest[region]
        print(f"{region}: {total['orders']} orders, amount {total['amount']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=None)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--checkpoint", default=str(Path("spark-checkpoints") / "order-totals"))
    args = parser.parse_args()
    with durables.connect(args.url) as client:
        produce(client, args.count)
        run_job(client.url, client.namespace, args.checkpoint)
        print_totals(client)


if __name__ == "__main__":
    main()
