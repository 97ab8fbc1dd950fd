"""Spark micro-batch throughput in `local[2]`, at 5,000, 50,000 and 500,000 events per
batch: a durable read by Spark (the source alone, into Spark's `noop` sink), and the whole
pipeline (the source, then the exactly-once `durables` sink into a second channel).

The Spark figure is the steady state: events over the time Spark spent on the batches
after the first (the first pays for starting the query, ~9 s here), from the query's
own progress reports. Each row carries Spark's own anchors, measured the same way:

- bare (`ratio_bare` = durables ÷ bare): a Python streaming data source reading the same
  stream by `XRANGE` with no durables semantics (`spark_bare`), on the same Spark path;
  for the pipeline, into a bare writer whose tasks `XADD` their rows.
- rate (`rate_per_s`): Spark's built-in `rate-micro-batch` source into `noop` at the
  same rows per batch, Spark's own floor per micro-batch (no Python, no server).
- raw: one Python process reading the same stream with plain `XRANGE ... COUNT 1000`
  (and, for the pipeline, writing each chunk to another stream with a pipeline of
  `XADD`s): no Spark at all.
- peer: none (NATS JetStream has no Spark connector to compare with).

Skipped with a note when pyspark (the `spark` extra) is not installed.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .consume import fill_channel
from .env import NAMESPACE, Env
from .results import Rate, Row, Target, all_of, at_least, median, ratio
from .scenario import Scenario, attempt

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.readwriter import DataStreamWriter

CHUNK = 1000
NO_PEER = "durables only: NATS has no Spark connector to compare with"
SOURCE_FLOOR = 0.8
PIPELINE_FLOOR = 0.7
SOURCE_RATE_AT_LARGEST = 100_000


@dataclass(frozen=True)
class Size:
    """One batch size: its rows' suffix, events per micro-batch, and events per run."""

    tag: str
    batch: int
    events: int


SIZES = (Size("5k", 5_000, 50_000), Size("50k", 50_000, 150_000), Size("500k", 500_000, 1_000_000))
QUICK = (Size("5k", 250, 1_000),)
"""--quick checks the rows of the smallest size only (each Spark query takes seconds)."""
CASES = (("spark_source", "source -> noop", False), ("spark_pipeline", "source -> sink", True))
Measure = Callable[["Env", "SparkSession", Size, bool], Rate]


class SparkThroughput(Scenario):
    """Events per second through Spark, source only and source + sink, per batch size."""

    name = "spark"
    title = "Spark local[2] micro-batches"

    @property
    def row_names(self) -> list[str]:
        return [f"{case}_{size.tag}" for case, _, _ in CASES for size in SIZES]

    def run(self, env: Env) -> list[Row]:
        try:
            import pyspark  # noqa: F401
        except ImportError:
            note = "n/a (not supported yet: pyspark is not installed, pip install durables[spark])"
            return [Row(n, self.title, notes={"durables": note}) for n in self.row_names]
        rows: dict[str, Row] = {}
        sizes = QUICK if env.quick else SIZES
        with _spark() as spark:
            for size in sizes:
                floor = attempt(env, functools.partial(_rate_floor, spark, size))
                for case, title, sink in CASES:
                    row = self._measure(env, spark, size, sink)
                    row.name, row.title = f"{case}_{size.tag}", f"{self.title}: {title}"
                    row.title += f", {size.batch:,} per batch"
                    row.extra["rate_per_s"] = floor.per_s if isinstance(floor, Rate) else None
                    rows[row.name] = row
        return [rows[name] for name in self.row_names if name in rows]

    def _measure(self, env: Env, spark: SparkSession, size: Size, sink: bool) -> Row:
        variants: dict[str, Measure] = {"durables": durables, "bare": bare, "raw": raw}
        found: dict[str, list[float]] = {name: [] for name in variants}
        notes: dict[str, str] = {"peer": NO_PEER}
        for _ in range(env.rounds):  # alternating, so drift touches every variant alike
            for name, measure in variants.items():
                outcome = attempt(env, functools.partial(measure, env, spark, size, sink))
                if isinstance(outcome, str):
                    notes[name] = outcome
                else:
                    found[name].append(outcome.per_s)
        per = {name: median(rates) if rates else None for name, rates in found.items()}
        row = Row("", "", notes=notes)
        row.per_s = {"durables": per["durables"], "raw": per["raw"], "peer": None}
        row.extra = {
            "events_per_batch": size.batch,
            "bare_per_s": per["bare"],
            "ratio_bare": ratio(per["durables"], per["bare"]),
        }
        return row

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        """Source ≥ 0.8x bare and pipeline ≥ 0.7x bare at every size; the source at
        ≥ 100,000 events/s at the largest batch."""
        bare = row.extra.get("ratio_bare")
        if row.name.startswith("spark_pipeline"):
            return at_least(f"≥ {PIPELINE_FLOOR}x bare", bare, PIPELINE_FLOOR)
        parts = [at_least(f"≥ {SOURCE_FLOOR}x bare", bare, SOURCE_FLOOR)]
        if row.name.endswith(SIZES[-1].tag):
            rate = row.rate("durables")
            goal = f"{SOURCE_RATE_AT_LARGEST:,}/s"
            parts.append(at_least(goal, rate, SOURCE_RATE_AT_LARGEST))
            return all_of(f"≥ {SOURCE_FLOOR}x bare and ≥ {goal}", parts)
        return parts[0]


def durables(env: Env, spark: SparkSession, size: Size, sink: bool) -> Rate:
    """The `durables` query over a durable, run until it has caught up (availableNow)."""
    with env.durables() as client:
        fill_channel(client.channel("in"), size.events)
        client.channel("in").durable("spark")
        client.channel("out")
        url = client.url
    frame = _where(spark.readStream.format("durables"), url, "in")
    frame = frame.option("durable", "spark").option("maxEventsPerTrigger", str(size.batch))
    loaded = frame.load()
    if sink:
        chosen = loaded.select("data", "key", "properties").writeStream.format("durables")
        return _until_caught_up(_where(chosen, url, "out"), size)
    return _until_caught_up(loaded.writeStream.format("noop"), size)


def bare(env: Env, spark: SparkSession, size: Size, sink: bool) -> Rate:
    """The bare data source over the same stream (and the bare writer into another)."""
    import durables_bench.spark_bare as spark_bare  # needs the optional pyspark, as below

    with env.durables() as client:
        fill_channel(client.channel("in"), size.events)
        source, target = client.keys("in").stream, client.keys("out").stream
    frame = (
        spark.readStream.format(spark_bare.NAME)
        .option("url", env.redis_url)
        .option("stream", source)
    )
    frame = frame.option("channel", "in").option("maxEventsPerTrigger", str(size.batch))
    loaded = frame.load()
    if sink:
        chosen = loaded.select("data", "key", "properties").writeStream.format(spark_bare.NAME)
        writer = chosen.option("url", env.redis_url).option("stream", target)
    else:
        writer = loaded.writeStream.format("noop")
    return _until_caught_up(writer, size)


def raw(env: Env, spark: SparkSession, size: Size, sink: bool) -> Rate:
    """Plain XRANGE over the same stream (and XADD to another), one process, no Spark."""
    with env.durables() as client:
        fill_channel(client.channel("in"), size.events)
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
    if read != size.events:
        raise RuntimeError(f"read {read} of {size.events} events")
    return meter.rate(read)


def _where(frame: Any, url: str, channel: str) -> Any:
    return frame.option("url", url).option("namespace", NAMESPACE).option("channel", channel)


def _until_caught_up(writer: DataStreamWriter, size: Size) -> Rate:
    with tempfile.TemporaryDirectory() as checkpoint:
        query = writer.option("checkpointLocation", checkpoint)
        started = query.trigger(availableNow=True).start()
        started.awaitTermination()
        if started.exception() is not None:
            raise RuntimeError(f"the Spark query failed: {started.exception()}")
        return _steady(list(started.recentProgress), size.events)


def _rate_floor(spark: SparkSession, size: Size) -> Rate:
    """Spark's `rate-micro-batch` source into `noop`, as many batches as the others run."""
    batches = -(-size.events // size.batch)
    frame = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", str(size.batch))
    with tempfile.TemporaryDirectory() as checkpoint:
        query = frame.load().writeStream.format("noop").option("checkpointLocation", checkpoint)
        started = query.trigger(processingTime="0 seconds").start()
        try:
            while len([p for p in started.recentProgress if p["numInputRows"]]) < batches:
                if started.exception() is not None:
                    raise RuntimeError(f"the Spark query failed: {started.exception()}")
                time.sleep(0.05)
        finally:
            started.stop()
        done = [p for p in started.recentProgress if p["numInputRows"]][:batches]
    return _steady(done, batches * size.batch)


def _steady(progress: Sequence[Any], count: int) -> Rate:
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
    import durables_bench.spark_bare as spark_bare

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
    session.dataSource.register(spark_bare.BareSource)
    try:
        yield session
    finally:
        if active is None:
            session.stop()
