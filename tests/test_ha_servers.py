"""The Sentinel and Cluster fixtures (`ha_sentinel`, `ha_cluster`), checked with plain redis-py.

Each test builds its own set (a sentinel set is 6 processes, a cluster 3 or 6) and
tears it down whatever happens. Every wait is bounded; measured times are printed
(`pytest -s` or `-rP`) and kept as user properties in the JUnit report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import redis
from redis.cluster import RedisCluster
from redis.sentinel import Sentinel

from .conftest import SERVER_KIND
from .ha_cluster import Cluster
from .ha_common import is_running
from .ha_sentinel import SentinelSet
from .servers import HOST, RedisProcess, server_binary

pytestmark = pytest.mark.slow

T = TypeVar("T")

FAILOVER_BOUND_S = 15.0
"""Generous: measured 1.5-2.5 s here (down-after 1000 ms, cluster-node-timeout 1000 ms)."""
CLIENT_TIMEOUT_S = 1.0
SERVICE = "mymaster"


@pytest.fixture
def sentinel_set(tmp_path: Path) -> Iterator[SentinelSet]:
    with SentinelSet(server_binary(SERVER_KIND), tmp_path / "sentinel") as servers:
        yield servers


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(server_binary(SERVER_KIND), tmp_path / "cluster") as servers:
        yield servers


@pytest.fixture
def cluster_with_replicas(tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(
        server_binary(SERVER_KIND), tmp_path / "cluster", replicas_per_primary=1
    ) as servers:
        yield servers


@pytest.fixture
def sentinel(sentinel_set: SentinelSet) -> Iterator[Sentinel]:
    client = Sentinel(  # type: ignore[no-untyped-call]
        sentinel_set.sentinel_addresses,
        socket_timeout=CLIENT_TIMEOUT_S,
        socket_connect_timeout=CLIENT_TIMEOUT_S,
        sentinel_kwargs={
            "socket_timeout": CLIENT_TIMEOUT_S,
            "socket_connect_timeout": CLIENT_TIMEOUT_S,
        },
    )
    try:
        yield client
    finally:
        client.close()


def _cluster_client(servers: Cluster) -> RedisCluster:
    return RedisCluster(
        host=HOST,
        port=servers.nodes[0].port,
        socket_timeout=CLIENT_TIMEOUT_S,
        socket_connect_timeout=CLIENT_TIMEOUT_S,
    )


# redis-py's Sentinel is untyped: these wrappers keep the ignores in one place.
def _primary_client(sentinel: Sentinel) -> redis.Redis:
    client: redis.Redis = sentinel.master_for(SERVICE)  # type: ignore[no-untyped-call]
    return client


def _replica_client(sentinel: Sentinel) -> redis.Redis:
    client: redis.Redis = sentinel.slave_for(SERVICE)  # type: ignore[no-untyped-call]
    return client


def _discovered_primary(sentinel: Sentinel) -> tuple[str, int]:
    host, port = sentinel.discover_master(SERVICE)  # type: ignore[no-untyped-call]
    return str(host), int(port)


def _eventually(what: str, attempt: Callable[[], T], timeout_s: float = 10.0) -> T:
    """`attempt()` until it stops raising a Redis error; the last error if it never does."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return attempt()
        except redis.RedisError as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still failing after {timeout_s} s") from exc
        time.sleep(0.1)


def _in_sync(primary: redis.Redis, replicas: int = 2) -> None:
    if primary.wait(replicas, 1000) < replicas:
        raise redis.RedisError(f"fewer than {replicas} replica(s) confirmed yet")


def _report(record_property: Callable[[str, object], None], name: str, seconds: float) -> None:
    print(f"{SERVER_KIND}: {name} {seconds:.2f} s")
    record_property(name, round(seconds, 3))


def _get(process: RedisProcess, key: str) -> bytes | None:
    with process.client() as client:
        value: bytes | None = client.get(key)
        return value


# -- Sentinel ---------------------------------------------------------------------------


def test_sentinel_set_describes_itself(sentinel_set: SentinelSet) -> None:
    ports = [port for _, port in sentinel_set.sentinel_addresses]
    assert len(ports) == 3
    assert sentinel_set.url == (
        "redis+sentinel://" + ",".join(f"{HOST}:{p}" for p in ports) + "/mymaster"
    )
    primary = sentinel_set.primary()
    assert primary is sentinel_set.data_nodes[0]
    assert sorted(p.port for p in sentinel_set.replicas()) == sorted(
        p.port for p in sentinel_set.data_nodes[1:]
    )


def test_sentinel_write_is_read_back_from_a_replica(
    sentinel_set: SentinelSet, sentinel: Sentinel
) -> None:
    assert _discovered_primary(sentinel) == (HOST, sentinel_set.primary().port)
    with _primary_client(sentinel) as primary, _replica_client(sentinel) as replica:
        primary.set("greeting", "hello")
        acked = primary.wait(1, 1000)
        assert acked >= 1
        # WAIT counts replicas that processed the write: at least `acked` have it now.
        holding = [p for p in sentinel_set.replicas() if _get(p, "greeting") == b"hello"]
        assert len(holding) >= acked
        # Through the Sentinel client's replica connection (either replica, once both have it).
        assert primary.wait(2, 1000) == 2
        assert replica.get("greeting") == b"hello"
        with pytest.raises(redis.ReadOnlyError):
            replica.set("greeting", "from a replica")


def test_sentinel_failover_keeps_waited_writes_and_the_old_primary_rejoins(
    sentinel_set: SentinelSet,
    sentinel: Sentinel,
    record_property: Callable[[str, object], None],
) -> None:
    with _primary_client(sentinel) as primary:
        primary.mset({f"k{i}": str(i) for i in range(100)})
        assert primary.wait(2, 1000) == 2

        old = sentinel_set.kill_primary()
        new, seconds = sentinel_set.wait_for_failover(old, timeout=FAILOVER_BOUND_S + 5)
        _report(record_property, "sentinel_failover_s", seconds)
        assert new is not old
        assert seconds < FAILOVER_BOUND_S

        assert _get(new, "k99") == b"99"
        # The same Sentinel client finds the new primary by itself.
        assert _eventually("read through master_for", lambda: primary.get("k0")) == b"0"
        assert _discovered_primary(sentinel) == (HOST, new.port)
        _eventually("write through master_for", lambda: primary.set("after", "failover"))
        _eventually("the other replica has it", lambda: _in_sync(primary, replicas=1))

        started = time.monotonic()
        sentinel_set.restart(old)
        _report(record_property, "sentinel_rejoin_s", time.monotonic() - started)
        # The sentinels settle on one primary; on a loaded machine they may even fail over
        # once more (to the replica that has every write). Whichever it is, the client
        # follows it and every node, the rejoined one too, holds the data.
        _eventually("replicas in sync", lambda: _in_sync(primary), timeout_s=30)
        assert is_running(sentinel_set.primary())
        assert _get(old, "after") == b"failover"
        assert _get(old, "k42") == b"42"


# -- Cluster ----------------------------------------------------------------------------


def _tags_on_every_primary(servers: Cluster) -> dict[int, str]:
    """One hash tag per primary port: keys `{tag}...` live on that primary."""
    tags: dict[int, str] = {}
    for n in range(1000):
        tag = f"t{n}"
        tags.setdefault(servers.primary_for(f"{{{tag}}}").port, tag)
        if len(tags) == servers.primary_count:
            return tags
    raise AssertionError(f"no tags found for all primaries, only {sorted(tags)}")


def test_cluster_keys_land_on_all_primaries(cluster: Cluster) -> None:
    assert cluster.url == f"redis+cluster://{HOST}:{cluster.nodes[0].port}"
    assert len(cluster.primaries()) == 3
    tags = _tags_on_every_primary(cluster)
    with _cluster_client(cluster) as client:
        for tag in tags.values():
            client.set(f"{{{tag}}}:key", tag)
        for port, tag in tags.items():
            assert client.get(f"{{{tag}}}:key") == tag.encode()
            owner = cluster.primary_for(f"{{{tag}}}:key")
            assert owner.port == port
            # The key is on that node itself: a plain client there reads it without MOVED.
            assert _get(owner, f"{{{tag}}}:key") == tag.encode()


def test_cluster_replica_takes_over_a_killed_primary(
    cluster_with_replicas: Cluster, record_property: Callable[[str, object], None]
) -> None:
    servers = cluster_with_replicas
    assert len(servers.nodes) == 6
    assert len(servers.primaries()) == 3
    key = "{order}:1"
    owner = servers.primary_for(key)
    with owner.client() as direct:
        direct.set(key, "kept")
        assert direct.wait(1, 1000) == 1

    with _cluster_client(servers) as client:
        assert client.get(key) == b"kept"

        killed, promoted, seconds = servers.kill_primary_of(key, timeout=FAILOVER_BOUND_S + 5)
        _report(record_property, "cluster_failover_s", seconds)
        assert killed is owner
        assert promoted is not owner
        assert seconds < FAILOVER_BOUND_S
        assert servers.primary_for(key) is promoted

        assert _eventually("read after failover", lambda: client.get(key)) == b"kept"
        _eventually("write after failover", lambda: client.set(key, "new"))
        assert _get(promoted, key) == b"new"

        started = time.monotonic()
        servers.restart(killed)
        _report(record_property, "cluster_rejoin_s", time.monotonic() - started)
        assert servers.primary_for(key) is promoted
        with killed.client() as rejoined:
            assert rejoined.info("replication")["role"] == "slave"
