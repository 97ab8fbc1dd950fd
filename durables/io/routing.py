"""Redis Cluster routing, decided without I/O, for both clients.

The sync client (`durables.io.cluster`) and the asyncio client (`durables.io.aio.cluster`) make
the same decisions on a cluster; they are here, once:

- that a reply meaning an outage or a moving slot (`verdicts.transient`) is raised, not
  kept as a reply, so the executor waits it out or sends again;
- which commands go to any one node (`KEYLESS_ANYWHERE`) and which with the command before
  them (`SAME_CONNECTION`);
- how a pipeline is grouped by node, and what a MOVED or ASK reply in it means (that command
  did not run: only it is sent again, through the cluster client);
- how a multi-stream `XREADGROUP` over several slots is split by slot and blocked on in
  slices of `READ_SLICE_MS`.

The sequences are *plans*: generators that yield the steps to carry out (`Send`: one command
through the cluster client; `OnNode`: a pipeline on one node's own connection) and are sent
each step's reply, or have its error thrown in, and return the result. Each client carries
the steps out with the loop that also drives its flows (`ops.flows.walk`, or
`walk_awaited`): that is all the I/O there is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

from redis.crc import key_slot
from redis.exceptions import AskError, RedisClusterException, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError

from ..reply_parsers import kept
from ..verdicts import transient

T = TypeVar("T")
N = TypeVar("N", bound=Hashable)


def unmapped(exc: RedisClusterException) -> RedisConnectionError:
    """redis-py's cluster client found no node to read its slot map from (the whole cluster
    away): a lost connection, waited out like any other."""
    return RedisConnectionError(f"no node of the cluster gave its slot map: {exc}")


READ_SLICE_MS = 100
"""A blocking read over several slots blocks on each in turn; one round over all of them
takes about this long, which bounds the extra latency of an event on another slot."""
MIN_SLICE_MS = 10
KEYLESS_ANYWHERE = frozenset({"INFO", "TIME"})
"""Commands without a key that any one node answers for all (redis-py would ask every
node and return a mapping by node)."""
SAME_CONNECTION = frozenset({"WAIT", "WAITAOF"})
"""Commands about the writes sent before them on the same connection: in a pipeline they
go to the node of the command before them."""
UNROUTED = KEYLESS_ANYWHERE | SAME_CONNECTION | {"PING"}
"""Commands not sent to the node of a key's slot."""
STREAM_READS = frozenset({"XREADGROUP", "XREAD"})
"""Commands whose slot `read_slot` finds from their stream keys (their `STREAMS` word a str,
as the operations write it)."""

Command: TypeAlias = Sequence[Any]


@dataclass(frozen=True)
class Send:
    """Step: one command through the cluster client, which routes it by its key's slot and
    follows MOVED and ASK; `anywhere`: a keyless command, for any one node. The reply, or the
    error reply raised."""

    args: tuple[Any, ...]
    anywhere: bool = False


@dataclass(frozen=True)
class OnNode(Generic[N]):
    """Step: `commands` pipelined on `node`'s own connection, in order (never redis-py's
    cluster pipeline, which sends again by itself after a lost connection). The replies,
    error replies as exceptions; a lost connection raised."""

    node: N
    commands: list[tuple[Any, ...]]


Step: TypeAlias = "Send | OnNode[Any]"
Plan: TypeAlias = Generator[Step, Any, T]


def name(args: Command) -> str:
    return str(args[0]).upper()


def routed(args: Command) -> bool:
    """Whether the command goes to the node serving its key's slot (in a pipeline)."""
    return name(args) not in UNROUTED


# -- single commands -----------------------------------------------------------------------


def send(args: Command) -> Plan[Any]:
    """One command: a multi-slot read split by slot, a keyless one to any node, the rest
    routed by the cluster client."""
    if name(args) == "XREADGROUP" and split_read(args) is not None:
        return (yield from read_by_slot(args))
    return (yield Send(tuple(args), anywhere=name(args) in KEYLESS_ANYWHERE))


def target(step: Send, any_node: Any, node_of: Callable[[int], Any]) -> dict[str, Any]:
    """Where redis-py's cluster client is to send `step` (its `target_nodes`): `any_node`
    (its flag for any one node), a stream read's node (`node_of` its slot, found without
    asking the server, `read_slot`; a MOVED reply is followed from there), or nothing:
    where it finds the command's keys to be."""
    if step.anywhere:
        return {"target_nodes": any_node}
    slot = read_slot(step.args)
    return {} if slot is None else {"target_nodes": node_of(slot)}


def captured(args: Command) -> Plan[Any]:
    """`send`, with an error reply returned instead of raised (an outage still raises)."""
    try:
        return (yield from send(args))
    except ResponseError as exc:
        if transient(exc):
            raise
        return kept(exc)


# -- pipelines -----------------------------------------------------------------------------


def pipeline(commands: Sequence[Command], nodes: Sequence[N | None]) -> Plan[list[Any]]:
    """`commands` with one pipeline per node (`nodes[i]`: the node serving command i's slot,
    None where it has none), in order within each node; the replies in order, error replies
    as exceptions. A command answered with MOVED or ASK did not run, so it is sent again
    through the cluster client, which follows the redirection. An outage reply raises, and
    so does one that says the slot is moving (`verdicts.transient`)."""
    replies: list[Any] = [None] * len(commands)
    for node, indexes in by_node(commands, nodes).items():
        if node is None:  # keyless: one by one, where the cluster client sends them
            for i in indexes:
                replies[i] = yield from captured(commands[i])
            continue
        got = yield OnNode(node, [tuple(commands[i]) for i in indexes])
        for i, reply in zip(indexes, got, strict=True):
            replies[i] = reply
    for i, reply in enumerate(replies):
        if isinstance(reply, AskError):  # MOVED too: it is an AskError
            replies[i] = yield from captured(commands[i])
    for reply in replies:
        if isinstance(reply, BaseException) and transient(reply):
            raise reply
    return replies


def by_node(commands: Sequence[Command], nodes: Sequence[N | None]) -> dict[N | None, list[int]]:
    """The commands' indexes by the node that serves them (None: keyless); a `WAIT` goes
    to the node of the command before it, whose writes it counts."""
    groups: dict[N | None, list[int]] = {}
    previous: N | None = None
    for i, (args, node) in enumerate(zip(commands, nodes, strict=True)):
        if name(args) in SAME_CONNECTION and previous is not None:
            node = previous
        groups.setdefault(node, []).append(i)
        previous = node if node is not None else previous
    return groups


# -- reads over several slots --------------------------------------------------------------


def _streams(args: Command) -> tuple[int, list[Any], list[Any], dict[int, list[int]]]:
    """A stream read's `STREAMS` index, its streams, their positions, and the streams'
    indexes by hash slot."""
    at = [str(a).upper() for a in args].index("STREAMS")
    rest = list(args[at + 1 :])
    half = len(rest) // 2
    streams, positions = rest[:half], rest[half:]
    by_slot: dict[int, list[int]] = {}
    for i, stream in enumerate(streams):
        key = stream if isinstance(stream, bytes) else str(stream).encode()
        by_slot.setdefault(key_slot(key), []).append(i)
    return at, streams, positions, by_slot


def read_slot(args: Command) -> int | None:
    """The hash slot of a stream read (`STREAM_READS`) whose streams share one, found here;
    None for a read over several slots and for any other command. redis-py's cluster
    client asks a node for the keys of a command it cannot place from its command table
    (`COMMAND GETKEYS`, for `XREADGROUP` and `XREAD`): a round trip more before every read."""
    if name(args) not in STREAM_READS:
        return None
    by_slot = _streams(args)[3]
    return next(iter(by_slot)) if len(by_slot) == 1 else None


def split_read(args: Command) -> list[tuple[Any, ...]] | None:
    """The parts of a multi-stream `XREADGROUP ... STREAMS k1 k2 id1 id2`, one per hash
    slot (in the order the streams were named); None when all streams share one slot."""
    at, streams, positions, by_slot = _streams(args)
    if len(by_slot) < 2:
        return None
    head = tuple(args[: at + 1])
    return [
        (*head, *(streams[i] for i in part), *(positions[i] for i in part))
        for part in by_slot.values()
    ]


def blocking(args: Command, block_ms: int | None) -> tuple[Any, ...]:
    """`args` with its BLOCK option replaced by `block_ms` (none for None)."""
    out: list[Any] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if str(a).upper() == "BLOCK":
            skip = True
            continue
        if str(a).upper() == "STREAMS" and block_ms is not None:
            out += ["BLOCK", block_ms]
        out.append(a)
    return tuple(out)


def block_ms(args: Command) -> int | None:
    upper = [str(a).upper() for a in args]
    return int(args[upper.index("BLOCK") + 1]) if "BLOCK" in upper else None


def merge(replies: Iterable[Any]) -> Any:
    """XREADGROUP replies of several parts as one (a RESP2 list or a RESP3 map); None if
    nothing came."""
    merged: list[Any] = []
    as_map: dict[Any, Any] = {}
    for reply in replies:
        if isinstance(reply, dict):
            as_map.update(reply)
        elif reply:
            merged.extend(reply)
    if as_map:
        return as_map
    return merged or None


def read_by_slot(args: Command, clock: Callable[[], float] = time.monotonic) -> Plan[Any]:
    """A multi-stream XREADGROUP as one read per slot. Every slot is read once without
    blocking (so a session replaying history gets all its channels at once); if nothing
    came and the read may block, the slots are blocked on in turn, a short slice each,
    until one brings events or the block time is over: as a single blocking read, the
    reply then holds the streams that had events."""
    parts = split_read(args)
    assert parts is not None
    first = []
    for part in parts:
        first.append((yield Send(blocking(part, None))))
    got = merge(first)
    wait_ms = block_ms(args)
    if got or wait_ms is None:
        return got
    deadline = clock() + wait_ms / 1000
    slice_ms = max(MIN_SLICE_MS, READ_SLICE_MS // len(parts))
    while True:
        for part in parts:
            left_ms = int((deadline - clock()) * 1000)
            if left_ms <= 0:
                return None
            reply = yield Send(blocking(part, min(slice_ms, left_ms)))
            if reply:
                return merge([reply])


# -- probing -------------------------------------------------------------------------------


def state_ok(info: Any) -> bool:
    """CLUSTER INFO says cluster_state:ok (raw text, or parsed into a mapping)."""
    if isinstance(info, dict):
        return str(info.get("cluster_state", "")) == "ok"
    raw = info.decode() if isinstance(info, bytes) else str(info)
    return "cluster_state:ok" in raw


__all__ = [
    "KEYLESS_ANYWHERE",
    "unmapped",
    "READ_SLICE_MS",
    "SAME_CONNECTION",
    "OnNode",
    "Plan",
    "Send",
    "Step",
    "blocking",
    "by_node",
    "captured",
    "merge",
    "pipeline",
    "read_by_slot",
    "read_slot",
    "routed",
    "send",
    "split_read",
    "state_ok",
    "target",
]
