"""Reading: a channel's retained events as a batch, and a durable as a stream.

The stream's offsets are event ids kept in Spark's checkpoint, and a micro-batch reads
exactly the ids between its two offsets, by range (never "the next undelivered"), so a
batch Spark runs again after a crash reads the same events. Planning a batch notes its
range in a record of the durable's (its events count in the transaction depth, and stay
on the channel: the durable's position has not passed them); Spark's commit moves the
durable's position past the batch. Spark commits batch N when it plans batch N+1, so the
durable is at most one batch behind.

Spark builds these readers in several processes (a planner, the driver's runner, the
executors, which get a pickled copy), so a reader holds only options and plain values;
connections are opened where they are used.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from pyarrow import RecordBatch
from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from ..client import Client
from ..durable import Durable
from ..errors import ConfigError, DurableNotFoundError
from ..selector import compile_filter
from . import store
from .columns import entries_batch, id_key
from .options import Connection, ReadOptions
from .ranges import FIRST_ID, IdRange, after, is_after, split, tasks_for
from .reporting import plain_errors

PLAN_SLICE = 10_000
"""Events handed out per plan script call when Spark asks for everything available: keeps
each call short on the server."""


class RangePartition(InputPartition):
    """One read task: the events of one id range of a channel, filtered."""

    def __init__(
        self,
        connection: Connection,
        span: IdRange,
        filter: str | None,
        handed_out_before: str | None = None,
    ) -> None:
        super().__init__((span.first, span.last))
        self.connection = connection
        self.span = span
        self.filter = filter
        self.handed_out_before = handed_out_before
        """Events up to this id had been handed out by the durable before: `redelivered`."""


def read_partition(partition: InputPartition) -> Iterator[RecordBatch]:
    """The rows of one task as Arrow batches (Spark converts no row in Python); runs on an
    executor."""
    if not isinstance(partition, RangePartition):
        return
    part = partition
    selector = compile_filter(part.filter)
    before = None if part.handed_out_before is None else id_key(part.handed_out_before)
    client = part.connection.shared()
    for entries in store.read_range(client, part.connection.channel, part.span):
        batch = entries_batch(part.connection.channel, entries, selector, before)
        if batch is not None:
            yield batch


class BatchReader(DataSourceReader):
    """`spark.read.format("durables")`: the events a channel retains, `startId` to `endId`
    (both inclusive), split into id ranges read in parallel."""

    def __init__(self, options: ReadOptions) -> None:
        compile_filter(options.filter)  # a bad filter fails here, on the driver
        with options.connection.connect() as client:
            info = client.get_channel(options.connection.channel).info()
            self.connection = replace(options.connection, url=client.url)
        first = options.start_id or info.first_id
        last = options.end_id or info.last_id
        self.filter = options.filter
        self.spans: list[IdRange] = []
        if first is not None and last is not None and info.length:
            tasks = tasks_for(info.length, options.num_partitions)
            self.spans = split(first, last, tasks)

    def partitions(self) -> list[InputPartition]:
        return [RangePartition(self.connection, span, self.filter) for span in self.spans]

    def read(self, partition: InputPartition) -> Iterator[RecordBatch]:
        return read_partition(partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("durables")`: the events of a durable, micro-batch by
    micro-batch, acknowledged when Spark commits each batch."""

    def __init__(self, options: ReadOptions) -> None:
        if options.durable is None:
            raise ConfigError(
                'readStream of format durables needs option durable, e.g. .option("durable", '
                '"spark-orders"): the durable keeps the stream\'s place on the channel'
            )
        self.options = options
        self.durable_name = options.durable
        with options.connection.connect() as client:  # bad URL, kind or filter: fail now
            durable = self._open(client)
            self.connection = replace(options.connection, url=client.url)
            self.filter = durable.spec.filter
            self.kind = durable.kind
        self._live: tuple[Client, Durable] | None = None
        self._planned: dict[str, store.Plan] = {}
        self._bound: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Executors get options and plain values, never a connection."""
        state = dict(self.__dict__)
        state["_live"] = None
        state["_planned"] = {}
        return state

    def _open(self, client: Client) -> Durable:
        """The durable, created (exclusive unless `kind` says) when missing; an existing one
        keeps its kind and filter unless options ask for others."""
        channel = client.channel(self.options.connection.channel)
        try:
            durable = channel.get_durable(self.durable_name)
        except DurableNotFoundError:
            return channel.durable(
                self.durable_name,
                kind=self.options.kind or "exclusive",
                start=self.options.starting_position,
                filter=self.options.filter,
            )
        if self.options.kind is not None or self.options.filter is not None:
            kind = self.options.kind or durable.kind
            wanted = self.options.filter if self.options.filter is not None else durable.spec.filter
            return channel.durable(self.durable_name, kind=kind, filter=wanted)
        return durable

    def _connected(self) -> tuple[Client, Durable]:
        if self._live is None:
            client = self.connection.connect()
            channel = client.get_channel(self.connection.channel)
            durable = channel.get_durable(self.durable_name)
            self._live = (client, durable)
        return self._live

    @plain_errors
    def initialOffset(self) -> dict[str, str]:
        """A new query starts before the first event the durable has not had acknowledged."""
        _, durable = self._connected()
        return {"id": store.position(durable)}

    def getDefaultReadLimit(self) -> ReadLimit:
        most = self.options.max_events_per_trigger
        return ReadAllAvailable() if most is None else ReadMaxRows(most)

    @plain_errors
    def prepareForTriggerAvailableNow(self) -> None:
        """`trigger(availableNow=True)`: read up to the channel's last event of now."""
        client, _ = self._connected()
        self._bound = client.get_channel(self.connection.channel).info().last_id or FIRST_ID

    @plain_errors
    def latestOffset(self, start: dict[str, str], limit: ReadLimit) -> dict[str, str]:
        """Plan the next batch after `start`: the durable notes it as handed to Spark."""
        _, durable = self._connected()
        first = start["id"]
        if isinstance(limit, ReadMaxRows):
            plan = store.plan_batch(durable, first, limit.max_rows, self._bound)
        else:
            plan = self._plan_all(durable, first)
        if durable.kind == "exclusive":  # the plan took the lease: keep it while we live
            durable.ctx.runtime.heartbeat.add(store.lease_of(durable))
        if plan.events:
            self._planned[plan.end] = plan
        return {"id": plan.end}

    def _plan_all(self, durable: Durable, start: str) -> store.Plan:
        plan = store.plan_batch(durable, start, PLAN_SLICE, self._bound)
        total, before = plan.events, plan.handed_out_before
        while plan.events == PLAN_SLICE:
            plan = store.plan_batch(durable, plan.end, PLAN_SLICE, self._bound)
            total += plan.events
        return store.Plan(plan.end, total, before)

    @plain_errors
    def partitions(self, start: dict[str, str], end: dict[str, str]) -> list[InputPartition]:
        first, last = start["id"], end["id"]
        if not is_after(last, first):
            return []
        plan = self._planned.get(last)  # dropped when Spark commits it
        # a batch planned in an earlier run (Spark runs it again after a crash) was handed
        # out before: every event of it is redelivered
        before = last if plan is None else plan.handed_out_before
        tasks = tasks_for(None if plan is None else plan.events, self.options.num_partitions)
        return [
            RangePartition(self.connection, span, self.filter, before)
            for span in split(after(first), last, tasks)
        ]

    def read(self, partition: InputPartition) -> Iterator[RecordBatch]:
        return read_partition(partition)

    @plain_errors
    def commit(self, end: dict[str, str]) -> None:
        """Spark committed every batch up to `end`: the durable's position moves past them."""
        _, durable = self._connected()
        done = [k for k in self._planned if not is_after(k, end["id"])]
        store.ack_upto(durable, end["id"])
        for planned in done:
            del self._planned[planned]

    def stop(self) -> None:
        """The query ended: other consumers may take an exclusive durable again. (Spark 4.3
        may end the reader's process without calling this; then the lease lapses.)"""
        if self._live is not None:
            client, durable = self._live
            self._live = None
            try:
                store.release(durable)
            finally:
                client.close()
