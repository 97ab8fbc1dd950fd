"""What the Spark connector asks of the server: plan a batch, acknowledge, read a range,
stage rows and commit a batch. Plain functions over a `Client`, one Lua script per
operation that changes state: Spark's own scripts (`durables/spark/lua/`), which the
client's executor loads when one of them is first run here, not at every connect.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redis.exceptions import ResponseError

from ..errors import DurablesError
from ..events import Encoded
from ..ids import previous
from ..io.leases import Lease
from ..ops.base import Op, as_bool, as_int, command, script
from ..reply_parsers import error_word, text
from ..scripts import names_in
from .reporting import SinkCommitError

if TYPE_CHECKING:
    from ..client import Client
    from ..durable import Durable
    from ..io.executor import Executor
    from .ranges import IdRange

SCRIPTS = names_in("spark")
"""Spark's scripts (`spark/plan`, `spark/ack`, `spark/commit`)."""

TOKEN = "spark"
"""The Spark reader's consumer name in a durable's group, and its lease value on an
exclusive durable. The same in every run, so a query restarted after a crash takes the
durable back at once instead of waiting for its old lease to lapse."""
READ_CHUNK = 10_000
"""Events per XRANGE round trip of a read task: one Arrow batch each (a round trip and a
batch cost about what converting a thousand events does)."""
STAGE_CHUNK = 10_000
"""Events per RPUSH of a write task."""
STAGE_TTL_MS = 24 * 3600 * 1000
"""Staged rows of a batch whose commit never came (a task retried, a query dropped) vanish
after a day."""


@dataclass(frozen=True)
class Plan:
    """A batch the durable handed to Spark: `(start, end]`, and which of it came before."""

    end: str
    events: int
    handed_out_before: str
    """Events up to this id were handed out by the durable before this plan."""


def _with_scripts(executor: Executor) -> Executor:
    """The executor, with Spark's scripts loaded (once per client; again after a
    reconnection, with the library's own)."""
    executor.add_scripts(SCRIPTS)
    return executor


def _about(durable: Durable) -> str:
    return f"durable {durable.name!r} on {durable.channel_name!r}"


def _plan(reply: Any) -> Plan:
    end, count, before = reply
    return Plan(text(end), int(count), text(before))


def plan_batch(durable: Durable, start: str, most: int, bound: str | None) -> Plan:
    """Find the next `most` events after `start` (not past `bound`) and note them as the
    durable's planned batch (the group's position moves only at the commit); on an
    exclusive durable, take (or keep) its lease first."""
    k = durable.keys
    lease = "" if durable.kind != "exclusive" else str(durable.ctx.lease_ms)
    op = script(
        "spark/plan",
        [
            k.stream,
            k.durables,
            k.lease(durable.name),
            k.alive(durable.name),
            k.planned(durable.name),
        ],
        [durable.name, TOKEN, lease, start, most, bound or ""],
        parse=_plan,
        context=_about(durable),
    )
    return _with_scripts(durable.ctx.executor).run(op)


def position(durable: Durable) -> str:
    """Where a new query starts: before the first event the durable handed out and nobody
    acknowledged, else at the durable's position (the end of the last committed batch)."""
    stream = durable.keys.stream
    summary, groups = durable.ctx.executor.run_all(
        [
            command("XPENDING", stream, durable.name, context=_about(durable)),
            command("XINFO GROUPS", stream, context=_about(durable)),
        ]
    )
    if summary.get("pending") and summary.get("min"):
        return previous(text(summary["min"]))
    for group in groups:
        if text(group["name"]) == durable.name:
            return text(group["last-delivered-id"])
    raise DurablesError(f"durable {durable.name!r} has no consumer group")  # pragma: no cover


def ack_upto(durable: Durable, end: str) -> int:
    """Commit the durable up to and including `end`: its position moves there, its planned
    batches up to there are forgotten and whatever is still pending up to there is
    acknowledged, in one script; how many events that acknowledged."""
    k = durable.keys
    keys = [k.stream, k.redeliveries(durable.name), k.keep(durable.name), k.planned(durable.name)]
    acked: int = _with_scripts(durable.ctx.executor).run(
        script("spark/ack", keys, [durable.name, end], parse=as_int, context=_about(durable))
    )
    durable.ctx.touch(durable.channel_name)
    return acked


def lease_of(durable: Durable) -> Lease:
    """The Spark reader's lease on an exclusive durable, for the client's heartbeat: kept
    while the reader's process lives, lapsing a lease time after it dies."""
    key = durable.keys.lease(durable.name)
    renew = script(
        "renew_lease", [key], [TOKEN, durable.ctx.lease_ms], parse=as_bool, context=_about(durable)
    )
    return Lease(TOKEN, renew, lambda: None)  # lost: the next plan takes it again, or fails


def release(durable: Durable) -> None:
    """Let other consumers take an exclusive durable again (the query stopped)."""
    if durable.kind == "exclusive":
        durable.ctx.executor.run(
            script(
                "release_lease",
                [durable.keys.lease(durable.name)],
                [TOKEN],
                context=_about(durable),
            )
        )


def read_range(client: Client, channel: str, span: IdRange) -> Iterator[list[Any]]:
    """The entries of `span`, in id order, `READ_CHUNK` per round trip."""
    stream = client.keys(channel).stream
    low = span.first
    while True:
        entries: Any = client.ctx.executor.run(
            command(
                "XRANGE",
                stream,
                low,
                span.last,
                "COUNT",
                READ_CHUNK,
                context=f"reading channel {channel!r}",
            )
        )
        if entries:
            yield entries
        if len(entries) < READ_CHUNK:
            return
        low = "(" + text(entries[-1][0])


def stage(client: Client, channel: str, token: str, events: Iterable[Encoded]) -> int:
    """Push encoded events to a staging list of the channel; returns how many."""
    key = client.keys(channel).stage(token)
    count, chunk = 0, list[bytes]()
    for data, event_key, properties, *_ in events:
        chunk += (data, event_key, properties)
        count += 1
        if len(chunk) >= STAGE_CHUNK * 3:
            _push(client, key, chunk)
            chunk = []
    if chunk or count == 0:
        _push(client, key, chunk)
    return count


def _push(client: Client, key: str, values: Sequence[bytes]) -> None:
    ops: list[Op[Any]] = [command("RPUSH", key, *values, context="staging rows")] if values else []
    ops.append(command("PEXPIRE", key, STAGE_TTL_MS, context="staging rows"))
    client.ctx.executor.run_all(ops)


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
    script_keys = [
        k.stream,
        k.meta,
        k.last_values,
        k.last_ids,
        k.sinks,
        k.session_trips,
        k.session_limits,
        k.overflowed,
    ]
    script_keys += [k.stage(t) for t in tokens]
    context = f"committing batch {batch_id} to channel {channel!r}"
    try:
        reply: list[Any] = _with_scripts(client.ctx.executor).run(
            script("spark/commit", script_keys, [sink_id, batch_id, events], context=context)
        )
    except ResponseError as exc:
        if error_word(exc)[0] != "STAGELOST":
            raise
        raise SinkCommitError(f"{context}: {exc}; the batch must run again") from None
    client.ctx.touch(channel)
    done, count, last = reply
    return Commit(bool(done), int(count), int(last))


def drop_stages(client: Client, channel: str, tokens: Sequence[str]) -> None:
    """Forget staged rows of a batch Spark aborted."""
    if tokens:
        k = client.keys(channel)
        context = f"dropping staged rows of {channel!r}"
        client.ctx.executor.run(command("DEL", *(k.stage(t) for t in tokens), context=context))
