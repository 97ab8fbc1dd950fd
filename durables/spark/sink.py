"""Writing: rows published to a channel, each micro-batch exactly once across restarts.

Spark promises only that a batch id is run again with the same offsets, not that a
task of it sees the same rows (SPARK-28650), so deduplicating per task cannot work.
Instead each task stages its rows on the server (a list beside the channel) and the
driver's `commit(messages, batchId)` takes one atomic step: unless the channel's record
for this query says the batch is in, append every staged row in partition order and
record the batch id. A batch Spark runs again after a crash finds itself recorded and
publishes nothing, even when the checkpoint's commit log lost its entry.

The writers take Spark's Arrow batches (no `Row` made per event in Python) and read each
column once per batch.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from ..events import Encoded, encode_event
from . import store
from .options import Connection, WriteOptions
from .reporting import plain_errors
from .schema import SinkColumns, sink_columns


@dataclass(frozen=True)
class Staged(WriterCommitMessage):
    """What one task staged: its partition, its staging list's token, how many events."""

    partition: int
    token: str
    events: int


class _Writer:
    """What the batch and the stream writer share: checked columns, staging, committing."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        self.columns = sink_columns(schema)  # a wrong column fails here, on the driver
        with options.connection.connect() as client:  # so does a bad URL or channel name
            client.channel(options.connection.channel)
            self.connection: Connection = replace(options.connection, url=client.url)
            self.max_bytes = client.settings.max_payload_bytes
        self.sink_id = options.sink_id

    def stage(self, batches: Iterator[pa.RecordBatch]) -> Staged:
        """Runs in a task: encode every row (bad ones fail the task with a PayloadError) and
        stage them for the driver's commit."""
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        token = uuid.uuid4().hex
        encoded = (e for b in batches for e in encode_batch(b, self.columns, self.max_bytes))
        count = store.stage(self.connection.shared(), self.connection.channel, token, encoded)
        return Staged(partition, token, count)

    def publish(
        self, messages: Sequence[WriterCommitMessage | None], sink_id: str, batch_id: int
    ) -> None:
        """Runs on the driver: append what the tasks staged, once per (sink, batch id); an
        empty `sink_id` appends without checking or recording."""
        staged = sorted((m for m in messages if isinstance(m, Staged)), key=lambda m: m.partition)
        store.commit_batch(
            self.connection.shared(),
            self.connection.channel,
            sink_id,
            batch_id,
            [m.token for m in staged],
            sum(m.events for m in staged),
        )

    def drop(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        tokens = [m.token for m in messages if isinstance(m, Staged)]
        store.drop_stages(self.connection.shared(), self.connection.channel, tokens)


class StreamWriter(_Writer, DataSourceStreamArrowWriter):
    """`df.writeStream.format("durables")`: each micro-batch appended exactly once."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Staged:
        return self.stage(iterator)

    @plain_errors
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self.publish(messages, self.sink_id or "", batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self.drop(messages)


class BatchWriter(_Writer, DataSourceArrowWriter):
    """`df.write.format("durables")`: the whole DataFrame appended at once, or nothing."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Staged:
        return self.stage(iterator)

    @plain_errors
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.publish(messages, "", 0)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self.drop(messages)


def encode_batch(batch: pa.RecordBatch, columns: SinkColumns, max_bytes: int) -> Iterator[Encoded]:
    """A batch's rows as the values the publish step takes; the checks of `Channel.publish`."""
    data = batch.column(columns.data).to_pylist()
    keys = _column(batch, columns.key)
    maps = _column(batch, columns.properties)
    for i, payload in enumerate(data):
        properties = maps[i]
        if properties:  # a map arrives as (name, value) pairs; a null value as ""
            properties = {name: "" if value is None else value for name, value in properties}
        yield encode_event(b"" if payload is None else payload, keys[i], properties, max_bytes)


def _column(batch: pa.RecordBatch, index: int | None) -> list[Any]:
    """A column's values, or None for every row when the column is absent."""
    if index is None:
        return [None] * batch.num_rows
    values: list[Any] = batch.column(index).to_pylist()
    return values
