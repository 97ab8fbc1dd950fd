"""How to reach the server, chosen from the URL.

The deployment is a parameter of one executor, not a client class of its own: a
transport only knows how to open a redis-py client for its URL. A standalone server
(`redis://`, `rediss://`), or a primary found through Sentinel
(`redis+sentinel://h1:p1,h2:p2/primary`): after a failover the executor's reconnection
asks the sentinels again, through redis-py's Sentinel connection pool, and a demoted
primary's READONLY reply is a lost connection there too. Or a Redis Cluster
(`redis+cluster://h1:p1[,h2:p2]`): redis-py's `RedisCluster` finds every node from the
hosts given and routes each command by its key's slot; `durables.io.cluster` holds what the
executor does differently there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis
import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisClusterException, RedisError
from redis.retry import Retry
from redis.sentinel import Sentinel

from .. import memory
from ..errors import ConfigError, ConnectionLostError
from ..reply_parsers import AS_SENT, as_sent
from ..urls import ServerUrl, parse_url
from .cluster import Server

R = TypeVar("R", redis.Redis, aioredis.Redis)

Opener = Callable[[ServerUrl, dict[str, Any]], Server]
"""Opens a client for the URL with redis-py's keyword arguments (timeouts, retry, TLS)."""


def _common(socket_timeout_s: float, connect_timeout_s: float) -> dict[str, Any]:
    return {
        "socket_timeout": socket_timeout_s,
        "socket_connect_timeout": connect_timeout_s,
        "socket_keepalive": True,
        "retry": Retry(NoBackoff(), 0),  # one retry policy: the executor's
    }


def _standalone(url: ServerUrl, options: dict[str, Any]) -> redis.Redis:
    try:
        return reading_as_sent(redis.Redis.from_url(url.url, **options))
    except ValueError as exc:
        raise ConfigError(f"malformed server URL {url.shown!r}: {exc}") from None


def reading_as_sent(client: R) -> R:
    """`client`, its stream reads left unparsed for our parsers (`reply_parsers.AS_SENT`)."""
    for name in AS_SENT:
        client.set_response_callback(name, as_sent)
    return client


def _sentinel(url: ServerUrl, options: dict[str, Any]) -> redis.Redis:
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
    primary: redis.Redis = sentinels.master_for(  # type: ignore[no-untyped-call]
        url.service, db=url.db, ssl=url.tls, **options
    )
    return reading_as_sent(primary)


def _cluster(url: ServerUrl, options: dict[str, Any]) -> Server:
    if url.db:
        raise ConfigError(f"a cluster has database 0 only, not {url.db} ({url.shown!r})")
    try:
        server = RedisCluster(
            startup_nodes=[ClusterNode(h, p) for h, p in url.hosts],  # type: ignore[no-untyped-call]
            username=url.username,
            password=url.password,
            ssl=url.tls,
            **options,
        )
    except (RedisError, RedisClusterException) as exc:  # no startup node gave a slot map
        raise ConnectionLostError(f"cannot reach the cluster at {url.shown!r}: {exc}") from exc
    return nodes_reading_as_sent(server)


def nodes_reading_as_sent(server: RedisCluster) -> RedisCluster:
    """`server`, its node clients reading stream replies as sent (`reading_as_sent`): those
    it has and those it makes later (a failover, a slot moved to a new node). A reply is
    parsed by its node's client; the cluster client's own callbacks apply only after."""
    manager = server.nodes_manager
    make = manager.create_redis_node

    def create_redis_node(host: str, port: int, **kwargs: Any) -> redis.Redis:
        client: redis.Redis = make(host, port, **kwargs)  # type: ignore[no-untyped-call]
        return reading_as_sent(client)

    manager.create_redis_node = create_redis_node  # type: ignore[method-assign]
    for node in manager.nodes_cache.values():
        if node.redis_connection is not None:
            reading_as_sent(node.redis_connection)
    return server


OPENERS: dict[str, Opener] = {
    "standalone": _standalone,
    "sentinel": _sentinel,
    "cluster": _cluster,
    "memory": memory.open_sync,
}


@dataclass(frozen=True)
class Transport:
    """Opens redis-py clients (each with a pool of its own) to the server of `url`."""

    url: ServerUrl
    open: Opener
    tls: dict[str, Any] = field(default_factory=dict)
    """redis-py's TLS arguments (`urls.tls_options`), for every connection."""

    def connect(self, socket_timeout_s: float, connect_timeout_s: float) -> Server:
        """A new client with a pool of its own (the heartbeat keeps one apart, so a hung
        socket of the application never starves lease renewal)."""
        return self.open(self.url, {**_common(socket_timeout_s, connect_timeout_s), **self.tls})


def transport_for(url: str, tls: dict[str, Any] | None = None) -> Transport:
    """The transport for `url`'s deployment; `ConfigError` for a URL we cannot use."""
    parsed = parse_url(url)
    return Transport(parsed, OPENERS[parsed.deployment], tls or {})


__all__ = ["OPENERS", "Transport", "nodes_reading_as_sent", "reading_as_sent", "transport_for"]
