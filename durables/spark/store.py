"""What the Spark connector asks of the server: plan a batch, acknowledge, read a range,
stage rows and commit a batch. Plain functions over a `Client`, one Lua script per
operation that changes state (`durables/lua/spark_*.lua`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redis.exceptions import ResponseError

from ..errors import DurablesError
from ..events import Encoded, event_from_entry
from ..leases import Lease
from ..replies import error_word, server_errors, text
from ..scripts import source
from .errors import SinkCommitError

if TYPE_CHECKING:
    from redis.commands.core import Script

    from ..client import Client
    from ..durable import Durable
    from ..events import Event
    from ..selector import Selector
    from .ranges import IdRange

TOKEN = "spark"
"""The Spark reader's consumer name in a durable's group, and its lease value on an
exclusive durable. The same in every run, so a query restarted after a crash takes the
durable back at once instead of waiting for its old lease to lapse."""
READ_CHUNK = 1000
"""Events per XRANGE round trip of a read task."""
STAGE_CHUNK = 1000
"""Events per RPUSH of a write task."""
STAGE_TTL_MS = 24 * 3600 * 1000
"""Staged rows of a batch whose commit never came (a task retried, a query dropped) vanish
after a day."""
Row = tuple[str, str, str | None, bytes, dict[str, str], int, bool]
"""One row of the source's schema: id, channel, key, data, properties, timestamp (in
milliseconds since the epoch, from the id), redelivered."""


class SparkScripts:
    """The connector's scripts, registered on one client (redis-py reloads them after a
    NOSCRIPT), beside the library's own `client.scripts`."""

    def __init__(self, client: Client) -> None:
        self.plan: Script = client.redis.register_script(source("spark_plan"))
        self.ack: Script = client.redis.register_script(source("spark_ack"))
        self.commit: Script = client.redis.register_script(source("spark_commit"))


@dataclass(frozen=True)
class Plan:
    """A batch the durable handed to Spark: `(start, end]`, and which of it came before."""

    end: str
    events: int
    handed_out_before: str
    """Events up to this id were handed out by the durable before this plan."""


def plan_batch(
    scripts: SparkScripts, durable: Durable, start: str, most: int, bound: str | None
) -> Plan:
    """Hand the next `most` events after `start` (not past `bound`) to the Spark reader;
    on an exclusive durable, take (or keep) its lease first."""
    k = durable.channel.keys
    lease = "" if durable.kind != "exclusive" else str(durable.client.lease_ms)
    with server_errors(f"durable {durable.name!r} on {durable.channel.name!r}"):
        end, count, before = scripts.plan(
            keys=[k.stream, k.durables, k.lease(durable.name), k.alive(durable.name)],
            args=[durable.name, TOKEN, lease, start, most, bound or ""],
        )
    return Plan(text(end), int(count), text(before))


def position(durable: Durable) -> str:
    """Where a new query starts: before the first event the durable handed out and nobody
    acknowledged, else at the durable's position."""
    stream = durable.channel.keys.stream
    with server_errors(f"durable {durable.name!r}"):
        summary = durable.client.redis.xpending(stream, durable.name)
        groups = durable.client.redis.xinfo_groups(stream)
    if summary.get("pending") and summary.get("min"):
        from ..ids import previous

        return previous(text(summary["min"]))
    for group in groups:
        if text(group["name"]) == durable.name:
            return text(group["last-delivered-id"])
    raise DurablesError(f"durable {durable.name!r} has no consumer group")  # pragma: no cover


def ack_upto(scripts: SparkScripts, durable: Durable, end: str) -> int:
    """Acknowledge every event of the durable up to and including `end`."""
    client, k = durable.client, durable.channel.keys
    with server_errors(f"durable {durable.name!r} on {durable.channel.name!r}"):
        acked = scripts.ack(
            keys=[k.stream, k.redeliveries(durable.name), k.keep(durable.name)],
            args=[durable.name, end],
        )
    client.maybe_housekeep(durable.channel.name)
    return int(acked)


def lease_of(durable: Durable) -> Lease:
    """The Spark reader's lease on an exclusive durable, for the client's heartbeat: kept
    while the reader's process lives, lapsing a lease time after it dies."""
    client, key = durable.client, durable.channel.keys.lease(durable.name)

    def renew() -> bool:
        return bool(client.scripts.renew_lease(keys=[key], args=[TOKEN, client.lease_ms]))

    return Lease(TOKEN, renew, lambda: None)  # lost: the next plan takes it again, or fails


def release(durable: Durable) -> None:
    """Let other consumers take an exclusive durable again (the query stopped)."""
    if durable.kind == "exclusive":
        with server_errors(f"durable {durable.name!r}"):
            durable.client.scripts.release_lease(
                keys=[durable.channel.keys.lease(durable.name)], args=[TOKEN]
            )


def read_range(
    client: Client,
    channel: str,
    span: IdRange,
    selector: Selector | None,
    handed_out_before: str | None,
) -> Iterator[list[Row]]:
    """The rows of the events in `span` that match `selector`, in id order, one list per
    round trip. Tombstones of keyed channels are not events to a Spark reader."""
    stream = client.keys(channel).stream
    low = span.first
    before = None if handed_out_before is None else _key(handed_out_before)
    while True:
        with server_errors(f"reading channel {channel!r}"):
            entries: Any = client.redis.xrange(stream, low, span.last, count=READ_CHUNK)
        rows = []
        for entry in entries:
            event = event_from_entry(channel, entry)
            if event is None or event.destroyed:
                continue
            if selector is not None and not selector.matches(event.key, event.properties):
                continue
            rows.append(_row(event, before))
        if rows:
            yield rows
        if len(entries) < READ_CHUNK:
            return
        low = "(" + text(entries[-1][0])


def _key(event_id: str) -> tuple[int, int]:
    ms, _, seq = event_id.partition("-")
    return int(ms), int(seq or 0)


def _row(event: Event, handed_out_before: tuple[int, int] | None) -> Row:
    properties = {
        name: value if isinstance(value, str) else _scalar(value)
        for name, value in event.properties.items()
    }
    key = _key(event.id)
    redelivered = handed_out_before is not None and key <= handed_out_before
    return (event.id, event.channel, event.key, event.data, properties, key[0], redelivered)


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def stage(client: Client, channel: str, token: str, events: Iterable[Encoded]) -> int:
    """Push encoded events to a staging list of the channel; returns how many."""
    key = client.keys(channel).stage(token)
    count, chunk = 0, list[bytes]()
    for data, event_key, properties, _ in events:
        chunk += (data, event_key, properties)
        count += 1
        if len(chunk) >= STAGE_CHUNK * 3:
            _push(client, key, chunk)
            chunk = []
    if chunk or count == 0:
        _push(client, key, chunk)
    return count


def _push(client: Client, key: str, values: Sequence[bytes]) -> None:
    with server_errors("staging rows"):
        pipe = client.redis.pipeline(transaction=False)
        if values:
            pipe.rpush(key, *values)
        pipe.pexpire(key, STAGE_TTL_MS)
        pipe.execute()


@dataclass(frozen=True)
class Commit:
    """What the driver's commit did: appended or skipped (the batch was in already)."""

    appended: bool
    events: int
    last_batch: int


def commit_batch(
    client: Client, channel: str, sink_id: str, batch_id: int, tokens: Sequence[str], events: int
) -> Commit:
    """Append the staged events of `tokens` (in order) unless `sink_id` has `batch_id`."""
    k = client.keys(channel)
    script_keys = [k.stream, k.meta, k.last_values, k.last_ids, k.sinks]
    script_keys += [k.stage(t) for t in tokens]
    context = f"committing batch {batch_id} to channel {channel!r}"
    try:
        with server_errors(context):
            done, count, last = SparkScripts(client).commit(
                keys=script_keys, args=[sink_id, batch_id, events]
            )
    except ResponseError as exc:
        if error_word(exc)[0] != "STAGELOST":
            raise
        raise SinkCommitError(f"{context}: {exc}; the batch must run again") from None
    client.maybe_housekeep(channel)
    return Commit(bool(done), int(count), int(last))


def drop_stages(client: Client, channel: str, tokens: Sequence[str]) -> None:
    """Forget staged rows of a batch Spark aborted."""
    if tokens:
        k = client.keys(channel)
        with server_errors(f"dropping staged rows of {channel!r}"):
            client.redis.delete(*(k.stage(t) for t in tokens))
