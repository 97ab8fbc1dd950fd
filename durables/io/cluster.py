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

The decisions are `durables.io.routing`'s, shared with the asyncio client
(`durables.io.aio.cluster`); here they are carried out on redis-py's sync cluster client.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from typing import Any, TypeAlias, TypeVar

import redis
from redis.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException, RedisError

from ..ops.flows import walk
from ..reply_parsers import kept
from . import routing
from .connections import wake_pool

T = TypeVar("T")
Server: TypeAlias = "redis.Redis | RedisCluster"
"""What a transport opens: one server's client, or a cluster's."""


def is_cluster(server: Server) -> bool:
    return isinstance(server, RedisCluster)


def send(server: RedisCluster, args: Sequence[Any]) -> Any:
    """One command: a multi-slot read split by slot, a keyless one to any node, the rest
    routed by redis-py (which follows MOVED and ASK)."""
    return _run(server, routing.send(args))


def pipeline(server: RedisCluster, commands: Sequence[Sequence[Any]]) -> list[Any]:
    """Send `commands` with one pipeline per node (`routing.pipeline`); the replies in
    order, error replies as exceptions. A lost connection raises (after the slot map is
    refreshed), as a plain pipeline does."""
    nodes = [_node_client(server, args) if routing.routed(args) else None for args in commands]
    return _run(server, routing.pipeline(commands, nodes))


def read_by_slot(server: RedisCluster, args: Sequence[Any]) -> Any:
    """A multi-stream XREADGROUP as one read per slot (`routing.read_by_slot`)."""
    return _run(server, routing.read_by_slot(args))


def _run(server: RedisCluster, plan: routing.Plan[T]) -> T:
    """Carry out a plan's steps, each reply given back to it (an error thrown in)."""
    return walk(plan, functools.partial(_step, server))


def _step(server: RedisCluster, step: routing.Step) -> Any:
    if isinstance(step, routing.OnNode):
        return _node_pipeline(server, step.node, step.commands)
    try:
        target = routing.target(step, RedisCluster.RANDOM, server.nodes_manager.get_node_from_slot)
        return server.execute_command(*step.args, **target)  # type: ignore[no-untyped-call]
    except RedisClusterException as exc:  # its own re-read of the slot map found no node
        raise routing.unmapped(exc) from exc


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
    return [kept(r) if isinstance(r, BaseException) else r for r in replies]


def _node_client(server: RedisCluster, args: Sequence[Any]) -> redis.Redis | None:
    """The client of the primary that serves the command's slot (None: let the cluster
    client decide)."""
    if routing.name(args) in routing.STREAM_READS:  # found here (`routing.read_slot`)
        slot = routing.read_slot(args)
    else:
        try:
            slot = server.determine_slot(*args)
        except RedisClusterException:
            return None  # no key, or keys in several slots
    if slot is None:
        return None
    node = server.nodes_manager.get_node_from_slot(slot)
    client: redis.Redis = server.get_redis_connection(node)
    return client


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
            if not routing.state_ok(info):
                return False
    except (RedisError, RedisClusterException, OSError):
        return False
    return True


def disconnect(server: RedisCluster, *, inuse_connections: bool) -> None:
    """Close the idle connections of every node's pool; with `inuse_connections` wake
    the busy ones (`connections.wake`: their threads close them)."""
    for node in server.get_nodes():  # type: ignore[no-untyped-call]
        if node.redis_connection is None:
            continue
        pool = node.redis_connection.connection_pool
        if inuse_connections:
            wake_pool(pool)
        else:
            pool.disconnect(inuse_connections=False)


__all__ = [
    "RedisCluster",
    "Server",
    "answers",
    "disconnect",
    "is_cluster",
    "load_scripts",
    "pipeline",
    "primaries",
    "read_by_slot",
    "refresh",
    "send",
]
