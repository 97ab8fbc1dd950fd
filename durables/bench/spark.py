"""Spark micro-batch throughput: a durable read by Spark in `local[2]` (the source alone,
into Spark's `noop` sink), and the whole pipeline (the source, then the exactly-once
`durables` sink into a second channel).

The Spark figure is the steady state: events over the time Spark spent on the batches
after the first (the first pays for starting the query, ~9 s here), from the query's
own progress reports. `MAX_EVENTS` per micro-batch.

- raw: one Python process reading the same stream with plain `XRANGE ... COUNT 1000`
  (and, for the pipeline, writing each chunk to another stream with a pipeline of
  `XADD`s). It is what one core does with redis-py and no Spark at all: the ratio shows
  what Spark's planning, task scheduling, Arrow conversion and the batch commit cost,
  which a cluster's executors have to win back by reading ranges in parallel.
- peer: none (NATS JetStream has no Spark connector to compare with).

Skipped with a note when pyspark (the `spark` extra) is not installed.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .consume import fill_channel
from .env import NAMESPACE, Env
from .results import Rate, Row, median
from .scenario import Scenario, attempt

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MAX_EVENTS = 5000
CHUNK = 1000
NO_PEER = "durables only: NATS has no Spark connector to compare with"


class SparkThroughput(Scenario):
    """Events per second through Spark: source only, and source + sink."""

    name = "spark"
    title = "Spark local[2] micro-batches"
    cases = (("spark_source", "source -> noop", False), ("spark_pipeline", "source -> sink", True))

    @property
    def row_names(self) -> list[str]:
        return [name for name, _, _ in self.cases]

    def run(self, env: Env) -> list[Row]:
        try:
            import pyspark  # noqa: F401
        except ImportError:
            note = "n/a (not supported yet: pyspark is not installed, pip install durables[spark])"
            return [self._row(n, t, {}, {"durables": note}) for n, t, _ in self.cases]
        count = env.size(50_000, 2_000)
        rows = []
        with _spark() as spark:
            for name, title, sink in self.cases:
                found: dict[str, list[Rate]] = {"durables": [], "raw": []}
                notes: dict[str, str] = {"peer": NO_PEER}
                for _ in range(env.rounds):
                    for variant, measure in (("durables", self.spark), ("raw", self.raw)):
                        call = functools.partial(measure, env, spark, count, sink)
                        outcome = attempt(env, call)
                        if isinstance(outcome, str):
                            notes[variant] = outcome
                        else:
                            found[variant].append(outcome)
                rows.append(self._row(name, f"{self.title}: {title}", found, notes))
        return rows

    def _row(
        self, name: str, title: str, found: dict[str, list[Rate]], notes: dict[str, str]
    ) -> Row:
        row = Row(name, title, notes=notes)
        for variant in ("durables", "raw"):
            rates = found.get(variant, [])
            row.per_s[variant] = median([r.per_s for r in rates]) if rates else None
        row.per_s["peer"] = None
        return row

    def spark(self, env: Env, spark: SparkSession, count: int, sink: bool) -> Rate:
        """The query over `count` events, run until it has caught up (availableNow)."""
        with env.durables() as client:
            fill_channel(client.channel("in"), count)
            client.channel("in").durable("spark")
            client.channel("out")
            url = client.url
        frame = (
            spark.readStream.format("durables")
            .option("url", url)
            .option("namespace", NAMESPACE)
            .option("channel", "in")
            .option("durable", "spark")
            .option("maxEventsPerTrigger", str(min(MAX_EVENTS, max(1, count // 4))))
            .load()
        )
        with tempfile.TemporaryDirectory() as checkpoint:
            if sink:
                writer = frame.select("data", "key", "properties").writeStream.format("durables")
                writer = writer.option("url", url).option("namespace", NAMESPACE)
                writer = writer.option("channel", "out")
            else:
                writer = frame.writeStream.format("noop")
            query = writer.option("checkpointLocation", checkpoint)
            started = query.trigger(availableNow=True).start()
            started.awaitTermination()
            if started.exception() is not None:
                raise RuntimeError(f"the Spark query failed: {started.exception()}")
            return _steady(list(started.recentProgress), count)

    def raw(self, env: Env, spark: SparkSession, count: int, sink: bool) -> Rate:
        """Plain XRANGE over the same stream (and XADD to another), one process."""
        with env.durables() as client:
            fill_channel(client.channel("in"), count)
            source, target = client.keys("in").stream, client.keys("out").stream
        meter = env.meter("raw")
        read = 0
        with env.redis() as r:
            low = "-"
            while True:
                entries: Any = r.xrange(source, low, "+", count=CHUNK)
                read += len(entries)
                if sink and entries:
                    pipe = r.pipeline(transaction=False)
                    for _, fields in entries:
                        pipe.xadd(target, fields)
                    pipe.execute()
                if len(entries) < CHUNK:
                    break
                low = "(" + entries[-1][0].decode()
        if read != count:
            raise RuntimeError(f"read {read} of {count} events")
        return meter.rate(read)


def _steady(progress: list[dict[str, Any]], count: int) -> Rate:
    """Events per second of the batches after the first (all of them if there is one)."""
    batches = [p for p in progress if p["numInputRows"]]
    events = sum(p["numInputRows"] for p in batches)
    if events != count:
        raise RuntimeError(f"Spark read {events} of {count} events")
    steady = batches[1:] or batches
    seconds = sum(p["durationMs"]["triggerExecution"] for p in steady) / 1000
    return Rate(sum(p["numInputRows"] for p in steady), seconds)


@contextmanager
def _spark() -> Iterator[SparkSession]:
    """The running SparkSession if there is one (left running), else a local[2] one."""
    from pyspark.sql import SparkSession

    import durables.spark

    active = SparkSession.getActiveSession()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = active or (
        SparkSession.builder.master("local[2]")
        .appName("durables-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    if active is None:
        session.sparkContext.setLogLevel("ERROR")
    durables.spark.register(session)
    try:
        yield session
    finally:
        if active is None:
            session.stop()
