"""Redis Cluster: the few things the executor does differently on a cluster.

Every key of a channel carries the channel's hash tag, so an operation on a channel
touches one slot and redis-py's `RedisCluster` routes it unchanged. What spans slots:

- a pipeline (`Executor.run_all`): split by the node that serves each operation's slot,
  one pipeline per node on that node's own connection (usually one: a reader's
  operations share their channel's slot); redis-py's cluster pipeline is not used, as it
  sends a command again by itself after a lost connection, which a read must never do;
- a multi-stream `XREADGROUP` (a session interested in channels in several slots): one
  cannot cross slots, so each slot is read on its own (`read_by_slot`);
- scripts: loaded on every primary (a promoted replica has none: NOSCRIPT reloads all);
- "does the server answer": every primary answers and says `cluster_state:ok` (while a
  shard's primary is down and not yet replaced the cluster refuses every command).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ClusterDownError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

Server: TypeAlias = "redis.Redis | RedisCluster"
"""What a transport opens: one server's client, or a cluster's."""

OUTAGE = (ClusterDownError, TryAgainError)
"""Replies that mean "the cluster cannot serve this slot now": waited out like a lost
connection (CLUSTERDOWN while a failed primary is not yet replaced)."""
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


def is_cluster(server: Server) -> bool:
    return isinstance(server, RedisCluster)


def send(server: RedisCluster, args: Sequence[Any]) -> Any:
    """One command: a multi-slot read split by slot, a keyless one to any node, the rest
    routed by redis-py (which follows MOVED and ASK)."""
    name = str(args[0]).upper()
    if name == "XREADGROUP" and split_read(args) is not None:
        return read_by_slot(server, args)
    if name in KEYLESS_ANYWHERE:
        return server.execute_command(*args, target_nodes=RedisCluster.RANDOM)  # type: ignore[no-untyped-call]
    return server.execute_command(*args)  # type: ignore[no-untyped-call]


# -- pipelines -----------------------------------------------------------------------------


def pipeline(server: RedisCluster, commands: Sequence[Sequence[Any]]) -> list[Any]:
    """Send `commands` with one pipeline per node, in order within each node; the replies
    in order, error replies as exceptions. A command answered with MOVED or ASK did not
    run, so it is sent again through the cluster client, which follows the redirection.
    A lost connection raises (after the slot map is refreshed), as a plain pipeline does."""
    replies: list[Any] = [None] * len(commands)
    for node_client, indexes in _by_node(server, commands).items():
        if node_client is None:  # keyless: one by one, where redis-py sends them
            for i in indexes:
                replies[i] = _capturing(server, commands[i])
            continue
        got = _node_pipeline(server, node_client, [commands[i] for i in indexes])
        for i, reply in zip(indexes, got, strict=True):
            replies[i] = reply
    for i, reply in enumerate(replies):
        if isinstance(reply, AskError):  # MOVED too: it is an AskError
            replies[i] = _capturing(server, commands[i])
    for reply in replies:
        if isinstance(reply, OUTAGE):
            raise reply
    return replies


def _node_pipeline(
    server: RedisCluster, node_client: redis.Redis, commands: Sequence[Sequence[Any]]
) -> list[Any]:
    pipe = node_client.pipeline(transaction=False)
    for args in commands:
        pipe.execute_command(*args)  # type: ignore[no-untyped-call]
    try:
        replies: list[Any] = pipe.execute(raise_on_error=False)
    except RedisConnectionError:
        refresh(server)
        raise
    return replies


def _by_node(
    server: RedisCluster, commands: Sequence[Sequence[Any]]
) -> dict[redis.Redis | None, list[int]]:
    """The commands' indexes by the client of the node that serves them (None: keyless)."""
    groups: dict[redis.Redis | None, list[int]] = {}
    previous: redis.Redis | None = None
    for i, args in enumerate(commands):
        if str(args[0]).upper() in SAME_CONNECTION and previous is not None:
            node_client: redis.Redis | None = previous  # WAIT counts this connection's writes
        else:
            node_client = _node_client(server, args)
        groups.setdefault(node_client, []).append(i)
        previous = node_client or previous
    return groups


def _node_client(server: RedisCluster, args: Sequence[Any]) -> redis.Redis | None:
    """The client of the primary that serves the command's slot; None for a keyless one."""
    if str(args[0]).upper() in KEYLESS_ANYWHERE | SAME_CONNECTION | {"PING"}:
        return None
    try:
        slot = server.determine_slot(*args)
    except RedisClusterException:
        return None  # no key, or keys in several slots: let the cluster client decide
    if slot is None:
        return None
    node = server.nodes_manager.get_node_from_slot(slot)
    client: redis.Redis = server.get_redis_connection(node)
    return client


def _capturing(server: RedisCluster, args: Sequence[Any]) -> Any:
    try:
        return send(server, args)
    except ResponseError as exc:
        if isinstance(exc, OUTAGE):
            raise
        return exc


# -- reads over several slots --------------------------------------------------------------


def split_read(args: Sequence[Any]) -> list[tuple[Any, ...]] | None:
    """The parts of a multi-stream `XREADGROUP ... STREAMS k1 k2 id1 id2`, one per hash
    slot (in the order the streams were named); None when all streams share one slot."""
    at = [str(a).upper() for a in args].index("STREAMS")
    rest = list(args[at + 1 :])
    half = len(rest) // 2
    streams, positions = rest[:half], rest[half:]
    by_slot: dict[int, list[int]] = {}
    for i, stream in enumerate(streams):
        name = stream if isinstance(stream, bytes) else str(stream).encode()
        by_slot.setdefault(key_slot(name), []).append(i)
    if len(by_slot) < 2:
        return None
    head = tuple(args[: at + 1])
    return [
        (*head, *(streams[i] for i in part), *(positions[i] for i in part))
        for part in by_slot.values()
    ]


def _blocking(args: Sequence[Any], block_ms: int | None) -> tuple[Any, ...]:
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


def _block_ms(args: Sequence[Any]) -> int | None:
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


def read_by_slot(server: RedisCluster, args: Sequence[Any]) -> Any:
    """A multi-stream XREADGROUP as one read per slot. Every slot is read once without
    blocking (so a session replaying history gets all its channels at once); if nothing
    came and the read may block, the slots are blocked on in turn, a short slice each,
    until one brings events or the block time is over: as a single blocking read, the
    reply then holds the streams that had events."""
    parts = split_read(args)
    assert parts is not None
    got = merge(server.execute_command(*_blocking(p, None)) for p in parts)  # type: ignore[no-untyped-call]
    block_ms = _block_ms(args)
    if got or block_ms is None:
        return got
    deadline = time.monotonic() + block_ms / 1000
    slice_ms = max(MIN_SLICE_MS, READ_SLICE_MS // len(parts))
    while True:
        for part in parts:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                return None
            reply = server.execute_command(*_blocking(part, min(slice_ms, left_ms)))  # type: ignore[no-untyped-call]
            if reply:
                return merge([reply])


# -- scripts, probing, connections ----------------------------------------------------------


def primaries(server: RedisCluster) -> list[redis.Redis]:
    """A client for each primary the slot map names now."""
    return [server.get_redis_connection(node) for node in server.get_primaries()]  # type: ignore[no-untyped-call]


def load_scripts(server: RedisCluster, sources: Sequence[str]) -> None:
    """`SCRIPT LOAD` every source on every primary, one pipeline each."""
    for node in primaries(server):
        pipe = node.pipeline(transaction=False)
        for source in sources:
            pipe.script_load(source)
        pipe.execute()


def refresh(server: RedisCluster) -> None:
    """Ask the cluster for its slot map again (after a lost node or a failover)."""
    with contextlib.suppress(RedisError, RedisClusterException, OSError):
        server.nodes_manager.initialize()  # if no node answers, the next probe tries again


def answers(server: RedisCluster) -> bool:
    """The slot map is fresh, every primary in it answers, and the cluster is ok."""
    try:
        server.nodes_manager.initialize()
        for node in primaries(server):
            info = node.execute_command("CLUSTER", "INFO")  # type: ignore[no-untyped-call]
            if not _state_ok(info):
                return False
    except (RedisError, RedisClusterException, OSError):
        return False
    return True


def _state_ok(info: Any) -> bool:
    """CLUSTER INFO says cluster_state:ok (raw text, or parsed into a mapping)."""
    if isinstance(info, dict):
        return str(info.get("cluster_state", "")) == "ok"
    raw = info.decode() if isinstance(info, bytes) else str(info)
    return "cluster_state:ok" in raw


def disconnect(server: RedisCluster, *, inuse_connections: bool) -> None:
    """Close the connections of every node's pool (in use too, if asked)."""
    for node in server.get_nodes():  # type: ignore[no-untyped-call]
        if node.redis_connection is not None:
            node.redis_connection.connection_pool.disconnect(inuse_connections=inuse_connections)


__all__ = [
    "RedisCluster",
    "OUTAGE",
    "Server",
    "answers",
    "disconnect",
    "is_cluster",
    "load_scripts",
    "merge",
    "pipeline",
    "primaries",
    "read_by_slot",
    "refresh",
    "send",
    "split_read",
]
