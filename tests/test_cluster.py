"""Redis Cluster: what only a cluster can show. Channels spread over the shards by their
hash tag, listings cover every shard, a session reads channels on three shards, scripts
live on every primary and come back after a flush, one heartbeat pipeline renews leases
on several shards. Each test runs on both clients (the asyncio one behind the sync API,
through `tests/aio_bridge.py`). (The behaviour modules run on the same cluster: `on_cluster`.)"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from redis.cluster import RedisCluster

import durables
from durables import ConfigError, metrics, scripts
from durables.reply_parsers import raw, streams_read

from .conftest import FAST, Connect
from .ha_cluster import Cluster
from .helpers import command_calls, fetch_all, publish

pytestmark = [pytest.mark.cluster, pytest.mark.both_clients]


def one_channel_per_primary(servers: Cluster, prefix: str) -> list[str]:
    """Channel names whose hash tags land on three different primaries."""
    by_port: dict[int, str] = {}
    for i in range(200):
        name = f"{prefix}{i}"
        by_port.setdefault(servers.primary_for(f"{{{name}}}").port, name)
        if len(by_port) == 3:
            return list(by_port.values())
    raise AssertionError(f"no three primaries for {prefix}*: {by_port}")


@pytest.fixture
def spread(cluster_server: Cluster) -> list[str]:
    return one_channel_per_primary(cluster_server, "spread")


@pytest.fixture
def on_cluster(
    connect: Connect, cluster_server: Cluster, namespace: str
) -> Iterator[durables.Client]:
    with connect(cluster_server.url, namespace=namespace, **FAST) as client:
        yield client


def test_channels_spread_over_every_primary_and_listings_cover_them(
    cluster_server: Cluster, on_cluster: durables.Client, spread: list[str], client_kind: str
) -> None:
    for n, name in enumerate(spread):
        on_cluster.channel(name).durable("audit")
        on_cluster.channel(name).publish_many(
            [durables.Message(f"{name}-{i}") for i in range(n + 1)]
        )
    owners = set()
    for name in spread:
        stream = on_cluster.keys(name).stream
        owner = cluster_server.primary_for(stream)
        with owner.client() as node:
            assert node.xlen(stream) == spread.index(name) + 1  # stored where its tag says
        owners.add(owner.port)
    assert len(owners) == 3
    assert sorted(i.name for i in on_cluster.channels()) == sorted(spread)
    assert {i.name: i.length for i in on_cluster.channels()} == {
        name: n + 1 for n, name in enumerate(spread)
    }
    if client_kind != "sync":
        return  # metrics reads through a sync client's redis-py client
    snap = metrics.snapshot(on_cluster)
    assert {c.info.name: c.info.length for c in snap.channels} == {
        name: n + 1 for n, name in enumerate(spread)
    }
    found = {c.info.name: [d.info.depth for d in c.durables] for c in snap.channels}
    assert found == {c: [spread.index(c) + 1] for c in spread}


def test_a_session_reads_channels_on_three_shards_replay_then_live(
    on_cluster: durables.Client, spread: list[str]
) -> None:
    got: list[tuple[str, str, bool]] = []
    lock = threading.Lock()

    class Listener:
        def on_event(self, event: durables.Event) -> None:
            with lock:
                got.append((event.channel, event.text, event.replayed))

    listener = Listener()

    def wait_for(count: int, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while len(got) < count:
            assert time.monotonic() < deadline, got
            time.sleep(0.01)

    for name in spread:
        on_cluster.channel(name)
    with on_cluster.session("roamer", timeout=30) as s:
        for name in spread:
            s.register_interest(name)
    for name in spread:  # queued while away, on three shards
        on_cluster.channel(name).publish(f"{name}-away")
    with on_cluster.session("roamer", timeout=30) as s:
        assert s.resumed
        for name in spread:
            s.add_listener(name, listener)
        s.ready_for_events()
        wait_for(3)
        assert sorted(got) == sorted((name, f"{name}-away", True) for name in spread)
        time.sleep(0.3)  # blocked on the shards now
        for n, name in enumerate(reversed(spread)):
            started = time.monotonic()
            on_cluster.channel(name).publish(f"{name}-live")
            wait_for(len(spread) + n + 1)
            assert time.monotonic() - started < 1.0  # a slice each, not the whole block
    assert sorted(got[3:]) == sorted((name, f"{name}-live", False) for name in spread)
    assert [r.id for r in on_cluster.sessions()] == ["roamer"]


def test_scripts_are_on_every_primary_and_come_back_after_a_flush(
    cluster_server: Cluster, on_cluster: durables.Client, spread: list[str]
) -> None:
    durables_ = [on_cluster.channel(name).durable("billing") for name in spread]
    primaries = cluster_server.primaries()
    assert len(primaries) == 3
    for node in primaries:
        with node.client() as c:
            assert raw(c, "SCRIPT", "EXISTS", scripts.sha("publish")) == [1]
            raw(c, "SCRIPT", "FLUSH")
    for name in spread:  # a single call: NOSCRIPT, reload on every primary, sent again
        on_cluster.channel(name).publish(f"{name}-1")
    for node in primaries:
        with node.client() as c:
            raw(c, "SCRIPT", "FLUSH")
    for dur, name in zip(durables_, spread, strict=True):  # a pipeline (ack + read) too
        with dur.consumer() as consumer:
            assert [e.text for e in fetch_all(consumer, 1)] == [f"{name}-1"]
            consumer.commit()


def test_one_heartbeat_renews_leases_on_three_shards(
    on_cluster: durables.Client, spread: list[str]
) -> None:
    consumers = [on_cluster.channel(name).durable("solo").consumer() for name in spread]
    for consumer in consumers:
        consumer.__enter__()
    try:
        time.sleep(FAST["lease_timeout_s"] * 2.5)  # past the lease: only renewal keeps it
        for name in spread:
            with pytest.raises(durables.DurableInUseError):
                on_cluster.channel(name).durable("solo").consumer().__enter__()
    finally:
        for consumer in consumers:
            consumer.__exit__(None, None, None)


def test_stream_reads_come_back_as_sent_from_every_node(
    on_cluster: durables.Client, spread: list[str], client_kind: str
) -> None:
    """Our parsers take a stream read as the server sent it: redis-py's own parse builds a
    dictionary per entry that is read once and dropped (about 0.5 µs per event). On a
    cluster each node's client parses its own replies, so every node must leave them as
    sent, a node client made later (a failover, a new node) too."""

    def reads_as_sent() -> None:
        for name in spread:
            stream = on_cluster.keys(name).stream
            (first,) = raw_read(stream)
            assert first[0] == ids[name].encode(), name  # as sent: [id, [field, value, ...]]
            assert isinstance(first[1], list) and first[1][:2] == [b"d", name.encode()], name

    def raw_read(stream: str) -> list[Any]:
        raw(on_cluster.redis, "XGROUP", "SETID", stream, "probe", "0")
        reply = raw(
            on_cluster.redis, "XREADGROUP", "GROUP", "probe", "reader", "STREAMS", stream, ">"
        )
        ((key, entries),) = streams_read(reply)  # a RESP2 list or a RESP3 map
        assert key == stream.encode()
        return entries

    ids = {name: on_cluster.channel(name).publish(name) for name in spread}
    for name in spread:
        raw(on_cluster.redis, "XGROUP", "CREATE", on_cluster.keys(name).stream, "probe", "0")
    reads_as_sent()
    if client_kind == "sync":  # the asyncio client's nodes share its callbacks by design
        server = on_cluster.redis
        assert isinstance(server, RedisCluster)
        manager = server.nodes_manager
        for node in manager.nodes_cache.values():
            node.redis_connection.close()
            node.redis_connection = None
        manager.create_redis_connections(list(manager.nodes_cache.values()))  # type: ignore[no-untyped-call]
        reads_as_sent()


def test_stream_reads_go_to_their_shard_without_asking_for_their_keys(
    cluster_server: Cluster, on_cluster: durables.Client, spread: list[str]
) -> None:
    """redis-py's cluster client asks a node for the keys of a command it cannot place from
    its command table (`COMMAND GETKEYS`), which for `XREADGROUP` was a round trip more
    before every read. Consumers of each kind, idle and busy, and a session reading three
    shards at once read without one."""
    got: list[str] = []

    class Listener:
        def on_event(self, event: durables.Event) -> None:
            got.append(event.text)

    def getkeys() -> int:
        calls = 0
        for node in cluster_server.primaries():
            with node.client() as c:
                calls += command_calls(c, "command|getkeys")
        return calls

    channels = [on_cluster.channel(name) for name in spread]
    before = getkeys()
    with on_cluster.session("reader", timeout=30) as session:
        for name in spread:
            session.register_interest(name)
            session.add_listener(name, Listener())
        session.ready_for_events()
        for channel in channels:
            with contextlib.ExitStack() as stack:
                consumers = [
                    stack.enter_context(channel.durable(kind, kind=kind).consumer())
                    for kind in ("exclusive", "shared", "serial")
                ]
                for consumer in consumers:
                    assert consumer.fetch(timeout=0.3) == []  # waits idle
                publish(channel, 5)
                for consumer in consumers:
                    assert len(fetch_all(consumer, 5)) == 5
                    consumer.commit()
        deadline = time.monotonic() + 5
        while len(got) < 5 * len(spread) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(got) == 5 * len(spread)
    assert getkeys() == before


def test_a_cluster_url_with_a_database_is_refused(
    connect: Connect, cluster_server: Cluster
) -> None:
    with pytest.raises(ConfigError, match="database 0"):
        connect(cluster_server.url + "/2")
