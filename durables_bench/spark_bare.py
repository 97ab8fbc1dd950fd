"""The bare data source of the Spark rows: format `durables_bare`, Spark's Python data source
API over one stream with no durables semantics at all, the anchor `ratio_bare` divides by.

It takes the same Spark path as the `durables` format (a Python streaming reader whose tasks
hand Spark Arrow batches of the same columns, two read tasks per batch, a Python streaming
writer whose tasks send Arrow batches), and does the least a reader of a stream can do:

- a batch of N events ends at the N-th id after the last one, found by one script that
  returns only that id (`XRANGE ... COUNT N` inside the server: no payload crosses);
- a task reads its id range with `XRANGE ... COUNT 10000` and turns the entries into
  the source's columns (properties decoded from their JSON, as the `durables` reader does);
- the writer's tasks `XADD` their rows in pipelines of 1,000, with no staging and no
  commit: a batch Spark runs again is written twice. Nothing is acknowledged or leased.

Runs in Spark's Python workers, which import it from the installed package.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pyarrow as pa
import redis
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from durables.spark.ranges import FIRST_ID, after, is_after, split
from durables.spark.schema import ARROW_SCHEMA, SOURCE_SCHEMA

NAME = "durables_bare"
READ_CHUNK = 10_000
WRITE_CHUNK = 1_000
TASKS = 2
NTH_ID = """
local got = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], ARGV[3], 'COUNT', ARGV[2])
if #got == 0 then return ARGV[1] end
return got[#got][1]
"""
"""KEYS[1] the stream; ARGV: the last id before the batch, N, the highest id allowed.
Returns the N-th id after ARGV[1] (or the last there is)."""


class BareSource(DataSource):
    """Options: url, stream, channel (the `channel` column's value), maxEventsPerTrigger."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return BareReader(dict(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return BareWriter(dict(self.options))


class Span(InputPartition):
    """One read task: the ids `first..last` of the stream."""

    def __init__(self, first: str, last: str) -> None:
        super().__init__((first, last))
        self.first, self.last = first, last


class BareReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are stream ids; nothing is remembered on the server."""

    def __init__(self, options: dict[str, str]) -> None:
        self.url, self.stream = options["url"], options["stream"]
        self.channel = options.get("channel", self.stream)
        self.most = int(options.get("maxeventspertrigger") or 0)
        self.bound = "+"

    def initialOffset(self) -> dict[str, str]:
        return {"id": FIRST_ID}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.most) if self.most else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        with redis.Redis.from_url(self.url) as r:
            last: Any = r.xrevrange(self.stream, "+", "-", count=1)
        self.bound = last[0][0].decode() if last else FIRST_ID

    def latestOffset(self, start: dict[str, str], limit: ReadLimit) -> dict[str, str]:
        most = limit.max_rows if isinstance(limit, ReadMaxRows) else 2**31
        with redis.Redis.from_url(self.url) as r:
            end: Any = r.eval(NTH_ID, 1, self.stream, start["id"], most, self.bound)
        return {"id": end.decode() if isinstance(end, bytes) else str(end)}

    def partitions(self, start: dict[str, str], end: dict[str, str]) -> list[InputPartition]:
        if not is_after(end["id"], start["id"]):
            return []
        return [Span(s.first, s.last) for s in split(after(start["id"]), end["id"], TASKS)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Span)
        with redis.Redis.from_url(self.url) as r:
            low = partition.first
            while True:
                entries: Any = r.xrange(self.stream, low, partition.last, count=READ_CHUNK)
                if entries:
                    yield self._batch(entries)
                if len(entries) < READ_CHUNK:
                    return
                low = "(" + entries[-1][0].decode()

    def _batch(self, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> pa.RecordBatch:
        ids = [i.decode() for i, _ in entries]
        props = [orjson.loads(f[b"p"]) if b"p" in f else {} for _, f in entries]
        columns = [
            pa.array(ids, pa.string()),
            pa.array([self.channel] * len(ids), pa.string()),
            pa.array([f[b"k"].decode() if b"k" in f else None for _, f in entries], pa.string()),
            pa.array([f.get(b"d", b"") for _, f in entries], pa.binary()),
            pa.array(
                [[(k, v if type(v) is str else str(v)) for k, v in p.items()] for p in props],
                ARROW_SCHEMA.field(4).type,
            ),
            pa.array([int(i.partition("-")[0]) * 1000 for i in ids], ARROW_SCHEMA.field(5).type),
            pa.array([False] * len(ids), pa.bool_()),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


class BareWriter(DataSourceStreamArrowWriter):
    """Columns data, key and properties, `XADD`ed by each task as it reads them."""

    def __init__(self, options: dict[str, str]) -> None:
        self.url, self.stream = options["url"], options["stream"]

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        with redis.Redis.from_url(self.url) as r:
            for batch in iterator:
                table = batch.to_pydict()
                data, keys = table["data"], table.get("key")
                props = table.get("properties")
                for first in range(0, len(data), WRITE_CHUNK):
                    pipe = r.pipeline(transaction=False)
                    for i in range(first, min(first + WRITE_CHUNK, len(data))):
                        fields: dict[Any, Any] = {b"d": data[i]}
                        if keys is not None and keys[i] is not None:
                            fields[b"k"] = keys[i]
                        if props is not None and props[i]:
                            fields[b"p"] = orjson.dumps(dict(props[i]))
                        pipe.xadd(self.stream, fields)
                    pipe.execute()
        return WriterCommitMessage()

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to commit: the tasks wrote their rows already."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to take back (a bare sink is at least once)."""
