"""Redis Cluster for the asyncio client: the sync client's decisions (`durables.io.routing`),
awaited on redis-py's asyncio `RedisCluster`.

The same behaviour as `durables.io.cluster`: a pipeline goes as one pipeline per node on that
node's own connection (never redis-py's cluster pipeline, which sends again after a lost
connection), a multi-slot `XREADGROUP` is read slot by slot, scripts are loaded on every
primary, and the server answers when every primary answers with `cluster_state:ok`.

What differs is redis-py's asyncio cluster client: it reads the slot map at its first
command, not when it is made, and again at the next command after a lost connection. When
no node gives it a map it raises `RedisClusterException`, which here is a lost connection
(our operations are each of one slot, so nothing else raises it from a send).
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Sequence
from typing import Any, TypeAlias, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, PipelineCommand, RedisCluster
from redis.exceptions import RedisClusterException, RedisError

from ...ops.flows import walk_awaited
from ...reply_parsers import kept
from ...verdicts import BROKEN
from .. import routing
from .connections import closed_is_lost

T = TypeVar("T")
AsyncServer: TypeAlias = "aioredis.Redis | RedisCluster"
"""What the asyncio transport opens: one server's client, or a cluster's."""


async def send(server: RedisCluster, args: Sequence[Any]) -> Any:
    """One command (`routing.send`): a multi-slot read split by slot, a keyless one to any
    node, the rest routed by redis-py (which follows MOVED and ASK)."""
    await _mapped(server)
    return await _run(server, routing.send(args))


async def pipeline(server: RedisCluster, commands: Sequence[Sequence[Any]]) -> list[Any]:
    """`commands` as one pipeline per node (`routing.pipeline`); the replies in order, error
    replies as exceptions; a lost connection raises after the slot map is read again."""
    await _mapped(server)
    nodes = [await _node(server, args) if routing.routed(args) else None for args in commands]
    return await _run(server, routing.pipeline(commands, nodes))


async def _run(server: RedisCluster, plan: routing.Plan[T]) -> T:
    """Carry out a plan's steps, awaiting each, its reply given back (an error thrown in)."""
    return await walk_awaited(plan, functools.partial(_step, server))


async def _step(server: RedisCluster, step: routing.Step) -> Any:
    if isinstance(step, routing.OnNode):
        return await _on_node(server, step.node, step.commands)
    try:
        with closed_is_lost():
            target = routing.target(
                step, RedisCluster.RANDOM, server.nodes_manager.get_node_from_slot
            )
            return await server.execute_command(*step.args, **target)
    except RedisClusterException as exc:
        raise routing.unmapped(exc) from exc


async def _on_node(
    server: RedisCluster, node: ClusterNode, commands: Sequence[Sequence[Any]]
) -> list[Any]:
    """`commands` pipelined on one connection of `node`; error replies as exceptions."""
    pending = [PipelineCommand(i, *args) for i, args in enumerate(commands)]
    _remember(server, node)
    try:
        with closed_is_lost():
            await node.execute_pipeline(pending)
        broken = next((c.result for c in pending if isinstance(c.result, BROKEN)), None)
        if broken is not None:
            raise broken
    except BROKEN:
        await refresh(server)
        raise
    return [kept(c.result) if isinstance(c.result, BaseException) else c.result for c in pending]


async def _node(server: RedisCluster, args: Sequence[Any]) -> ClusterNode | None:
    """The primary that serves the command's slot (None: let the cluster client decide)."""
    try:
        if routing.name(args) in routing.STREAM_READS:  # found here (`routing.read_slot`)
            slot = routing.read_slot(args)
            return None if slot is None else server.nodes_manager.get_node_from_slot(slot)
        with closed_is_lost():  # any other command whose keys move would ask a node
            nodes: list[ClusterNode] = await server.get_nodes_from_slot(*args)
    except RedisClusterException:
        return None  # no key, or keys in several slots, or the slot not in the map
    return nodes[0] if nodes else None


async def _mapped(server: RedisCluster) -> None:
    """Read the slot map if the client has none (at its first command, or after redis-py
    dropped it on a lost connection)."""
    try:
        await server.initialize()
    except RedisClusterException as exc:
        raise routing.unmapped(exc) from exc


# -- scripts, probing, connections ----------------------------------------------------------


async def load_scripts(server: RedisCluster, sources: Sequence[str]) -> None:
    """`SCRIPT LOAD` every source on every primary, one pipeline each."""
    await _mapped(server)
    for node in server.get_primaries():
        for reply in await _on_node(server, node, [("SCRIPT", "LOAD", s) for s in sources]):
            if isinstance(reply, Exception):
                raise reply


async def refresh(server: RedisCluster) -> None:
    """Ask the cluster for its slot map again (after a lost node or a failover)."""
    _remember(server, *server.get_nodes())
    with contextlib.suppress(RedisError, RedisClusterException, OSError):
        await server.nodes_manager.initialize()  # if no node answers, the next probe tries again


async def answers(server: RedisCluster) -> bool:
    """The slot map is fresh, every primary in it answers, and the cluster is ok."""
    _remember(server, *server.get_nodes())
    try:
        await server.nodes_manager.initialize()
        for node in server.get_primaries():
            if not routing.state_ok(await node.execute_command("CLUSTER", "INFO")):
                return False
    except (RedisError, RedisClusterException, OSError):
        return False
    return True


async def disconnect(server: RedisCluster, *, inuse_connections: bool) -> None:
    """Close the connections of every node (in use too, if asked)."""
    for node in server.get_nodes():
        if inuse_connections:
            await node.disconnect()
        else:
            await node.disconnect_free_connections()


async def close(server: RedisCluster) -> None:
    """Close every connection of the client. redis-py's `aclose()` does nothing while the
    client is waiting to read its slot map again (after a lost connection, or a probe that
    read it only through its nodes manager), so the nodes are closed here too."""
    await server.aclose()
    await server.nodes_manager.aclose()
    await server.nodes_manager.aclose("startup_nodes")
    for node in _SEEN.pop(server, {}).values():
        with contextlib.suppress(Exception):
            await node.disconnect()


_SEEN: weakref.WeakKeyDictionary[RedisCluster, dict[int, ClusterNode]] = weakref.WeakKeyDictionary()
"""Every node each client sent to: redis-py drops a node from its map when the map
changes (a failover, a killed primary) and leaves the connections that were in use to
close when they are released, which a connection broken mid-read never is; `close`
closes them, not the garbage collector long after the event loop ended."""


def _remember(server: RedisCluster, *nodes: ClusterNode) -> None:
    seen = _SEEN.setdefault(server, {})
    for node in nodes:
        seen[id(node)] = node


__all__ = [
    "AsyncServer",
    "RedisCluster",
    "answers",
    "close",
    "disconnect",
    "load_scripts",
    "pipeline",
    "refresh",
    "send",
]
