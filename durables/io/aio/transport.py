"""How the asyncio client reaches the server, chosen from the URL as for the sync client.

The same URLs (`redis://`, `rediss://`, `redis+sentinel://`, `redis+cluster://`), opened
with redis-py's asyncio clients (hiredis parses replies when installed): a cluster's reads
its slot map at the first command (`durables.io.aio.cluster`). One retry policy: the executor's.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import NoBackoff
from redis.exceptions import RedisClusterException

from ... import memory
from ...errors import ConfigError
from ...reply_parsers import AS_SENT, as_sent
from ...urls import ServerUrl, parse_url
from ..transport import reading_as_sent
from . import cluster
from .cluster import AsyncServer


def _common(socket_timeout_s: float, connect_timeout_s: float) -> dict[str, Any]:
    return {
        "socket_timeout": socket_timeout_s,
        "socket_connect_timeout": connect_timeout_s,
        "socket_keepalive": True,
        "retry": Retry(NoBackoff(), 0),
    }


def connect(
    url: str, socket_timeout_s: float, connect_timeout_s: float, tls: dict[str, Any] | None = None
) -> AsyncServer:
    """A new asyncio redis-py client (with a pool of its own) for `url`'s deployment;
    `tls`: redis-py's TLS arguments (`urls.tls_options`)."""
    parsed = parse_url(url)
    options = {**_common(socket_timeout_s, connect_timeout_s), **(tls or {})}
    if parsed.deployment == "sentinel":
        return _sentinel(parsed, options)
    if parsed.deployment == "cluster":
        return _cluster(parsed, options)
    if parsed.deployment == "memory":
        return memory.open_async(parsed, options)
    try:
        return reading_as_sent(aioredis.Redis.from_url(parsed.url, **options))
    except ValueError as exc:
        raise ConfigError(f"malformed server URL {parsed.shown!r}: {exc}") from None


def _sentinel(url: ServerUrl, options: dict[str, Any]) -> aioredis.Redis:
    auth = {"username": url.username, "password": url.password}
    connect_timeout_s = options["socket_connect_timeout"]
    sentinels = Sentinel(  # type: ignore[no-untyped-call]
        list(url.hosts),
        sentinel_kwargs={
            "socket_timeout": connect_timeout_s,
            "socket_connect_timeout": connect_timeout_s,
            **auth,
        },
        **auth,
    )
    assert url.service is not None
    primary: aioredis.Redis = sentinels.master_for(url.service, db=url.db, ssl=url.tls, **options)
    return reading_as_sent(primary)


def _cluster(url: ServerUrl, options: dict[str, Any]) -> RedisCluster:
    if url.db:
        raise ConfigError(f"a cluster has database 0 only, not {url.db} ({url.shown!r})")
    try:
        # reinitialize_steps=0: each MOVED reply moves its slot in the map, never closes the
        # client (redis-py's asyncio client closes every connection at every fifth MOVED by
        # default, in-flight reads included: a resharding would look like lost connections)
        server = RedisCluster(
            startup_nodes=[ClusterNode(h, p) for h, p in url.hosts],
            username=url.username,
            password=url.password,
            ssl=url.tls,
            reinitialize_steps=0,
            **options,
        )
    except RedisClusterException as exc:
        raise ConfigError(f"cannot use the cluster URL {url.shown!r}: {exc}") from None
    for name in AS_SENT:  # its nodes, those made later too, share its callbacks
        server.set_response_callback(name, as_sent)
    return server


async def close(server: AsyncServer) -> None:
    """Close a client `connect` opened, with what it opened for itself: a cluster's node
    connections, and a Sentinel-found primary's clients of the sentinels (redis-py leaves
    them open, and an asyncio connection left open outlives its event loop)."""
    if isinstance(server, RedisCluster):
        await cluster.close(server)
        return
    await server.aclose()
    pool = server.connection_pool
    if isinstance(pool, SentinelConnectionPool):
        for sentinel in pool.sentinel_manager.sentinels:
            await sentinel.aclose()


__all__ = ["close", "connect"]
