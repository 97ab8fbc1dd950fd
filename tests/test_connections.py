"""The executors' own connections (`durables.io.connections`, `durables.io.aio.connections`): what
redis-py's pool did for every call, they must still do. A socket the server closed while
idle is replaced without an outage; a forked child never shares its parent's sockets;
replies, error replies and a pipeline's mixed replies come back as redis-py would parse
them; interrupting wakes a call blocked on the server."""

from __future__ import annotations

import asyncio
import collections
import os
import random
import threading
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.exceptions import NoScriptError, ResponseError

from durables.io.aio.connections import AsyncConnections
from durables.io.connections import Connections, pack, pack_all

from .conftest import FAST, Connect
from .servers import RedisProcess

pytestmark = pytest.mark.both_clients


def test_connections_the_server_closed_while_idle_are_replaced_without_an_outage(
    connect: Connect, server: RedisProcess, server_url: str, namespace: str
) -> None:
    changes: list[tuple[str, str]] = []
    with connect(server_url, namespace=namespace, **FAST) as client:
        client.on_state(lambda old, new: changes.append((old, new)))
        channel = client.channel("orders")
        durable = channel.durable("audit")
        ids = [channel.publish(b"before")]
        with server.client() as admin:
            killed = admin.client_kill_filter(_type="normal", skipme=True)
        assert killed >= 1
        ids.append(channel.publish(b"after"))
        with durable.consumer() as consumer:
            got = consumer.fetch(timeout=1.0)
        assert [e.id for e in got] == ids
        assert changes == []  # no outage seen: the closed sockets were simply replaced
        assert client.state == "connected"


def test_replies_and_error_replies_read_as_redis_py_parses_them(
    server: RedisProcess, namespace: str
) -> None:
    with server.client() as r:
        conns = Connections(r)
        key = f"{namespace}:h"
        assert conns.call(("HSET", key, "a", 1, "b", 2)) == 2
        assert conns.call(("HGETALL", key)) == {b"a": b"1", b"b": b"2"}  # its callback
        with pytest.raises(NoScriptError):
            conns.call(("EVALSHA", "0" * 40, 0))
        replies = conns.pipeline([("HGET", key, "a"), ("INCR", key), ("HLEN", key)])
        assert replies[0] == b"1" and replies[2] == 2
        assert isinstance(replies[1], ResponseError) and "WRONGTYPE" in str(replies[1])
        assert conns.call(("HGET", key, "b")) == b"2"  # the connection is still in step


def test_a_forked_child_does_not_share_its_parents_sockets(
    server: RedisProcess, namespace: str
) -> None:
    """Parent and child call at the same time; on one shared socket their replies would
    cross (each would read the other's counts)."""
    rounds = 2000
    with server.client() as r:
        conns = Connections(r)
        key = f"{namespace}:n"
        conns.call(("SET", key, 0))  # the parent's connection exists before the fork
        go = threading.Event()
        pid = os.fork()
        if pid == 0:  # the child: a fresh client state, its own socket
            code = 1
            try:
                got = [conns.call(("INCR", key)) for _ in range(rounds)]
                code = 0 if got == sorted(got) and len(set(got)) == rounds else 2
            finally:
                os._exit(code)
        go.set()
        mine = [conns.call(("INCR", key)) for _ in range(rounds)]
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert mine == sorted(mine) and len(set(mine)) == rounds
        assert int(r.get(key) or 0) == 2 * rounds


def test_interrupting_closes_a_connection_in_use(server: RedisProcess, namespace: str) -> None:
    """`disconnect(in_use=True)` wakes a call blocked on the server at once."""
    with server.client() as r:
        conns = Connections(
            redis.Redis(
                host=r.connection_pool.connection_kwargs["host"],
                port=r.connection_pool.connection_kwargs["port"],
                socket_timeout=30,
            )
        )
        conns.call(("PING",))
        failed: list[BaseException] = []

        def blocked() -> None:
            try:
                conns.call(("BLPOP", f"{namespace}:nothing", 20))
            except BaseException as exc:
                failed.append(exc)

        thread = threading.Thread(target=blocked)
        thread.start()
        with server.client() as admin:  # wait until the server has it blocked
            for _ in range(200):
                if admin.info("clients")["blocked_clients"] >= 1:
                    break
                threading.Event().wait(0.01)
        conns.disconnect(in_use=True)
        thread.join(timeout=5)
        assert not thread.is_alive()
        assert failed and isinstance(failed[0], (redis.ConnectionError, OSError))
        assert conns.call(("PING",)) is True  # and the next call connects again


def test_interrupting_wakes_a_busy_connection_and_leaves_closing_it_to_its_thread(
    server: RedisProcess,
) -> None:
    """Closed from another thread, a busy connection's descriptor is free for a new socket
    to take before its thread's read begins, and that read then waits on another
    connection's socket (readers hung for the socket timeout after a paused server came
    back). So an interrupt only shuts a busy socket down: a read ends at once, and the
    thread using the connection closes it as it gives it back, after `close` too."""
    with server.client() as r:
        kwargs = r.connection_pool.connection_kwargs
        conns = Connections(redis.Redis(host=kwargs["host"], port=kwargs["port"]))
        conns.call(("PING",))
        busy = conns._take()  # as a thread between sending and reading holds it
        sock = busy._sock
        conns.disconnect(in_use=True)
        assert sock.fileno() != -1  # its descriptor is still its own
        assert sock.recv(1) == b""  # but a read ends at once
        conns.close()
        conns._give_back(busy)  # its thread, done with it
        assert sock.fileno() == -1 and busy._sock is None


def test_async_replies_error_replies_and_an_interrupted_call(
    server: RedisProcess, namespace: str
) -> None:
    """The asyncio twin: replies as redis-py parses them, a connection in step after an
    error reply, and `disconnect(in_use=True)` waking a call blocked on the server."""

    async def scenario() -> None:
        client = aioredis.Redis(host="127.0.0.1", port=server.port, socket_timeout=30)
        conns = AsyncConnections(client)
        key = f"{namespace}:ah"
        assert await conns.call(("HSET", key, "a", 1)) == 1
        assert await conns.call(("HGETALL", key)) == {b"a": b"1"}
        with pytest.raises(NoScriptError):
            await conns.call(("EVALSHA", "0" * 40, 0))
        replies = await conns.pipeline([("HGET", key, "a"), ("INCR", key), ("HLEN", key)])
        assert replies[0] == b"1" and replies[2] == 1 and isinstance(replies[1], ResponseError)
        blocked = asyncio.create_task(conns.call(("BLPOP", f"{namespace}:nothing", 20)))
        with server.client() as admin:
            for _ in range(200):
                if admin.info("clients")["blocked_clients"] >= 1:
                    break
                await asyncio.sleep(0.01)
        await conns.disconnect(in_use=True)
        done, _ = await asyncio.wait({blocked}, timeout=5)
        assert done, "the blocked call did not wake"
        assert isinstance(blocked.exception(), (redis.ConnectionError, OSError))
        assert await conns.call(("PING",)) is True  # the next call connects again
        await conns.disconnect(in_use=True)
        await client.aclose()

    asyncio.run(scenario())


def test_async_connections_closed_under_their_commands_fail_as_lost_connections(
    server: RedisProcess, namespace: str
) -> None:
    """An interrupt (a heartbeat that went unanswered) closes connections other tasks are
    sending on or reading from. redis-py's asyncio connection then fails with
    AttributeError (its writer or reader is None) when the close lands between two of
    its steps; each such failure must be a lost connection, which the executor rides out,
    and not an error that ends a reader. Bounded: 300 interrupts among eight tasks."""

    async def scenario() -> collections.Counter[str]:
        client = aioredis.Redis(host="127.0.0.1", port=server.port, socket_timeout=30)
        conns = AsyncConnections(client)
        failures: collections.Counter[str] = collections.Counter()
        stopping = asyncio.Event()

        async def busy(i: int) -> None:
            key = f"{namespace}:busy{i}"
            while not stopping.is_set():
                try:
                    if i % 2:
                        await conns.pipeline(
                            [
                                ("SET", key, "v" * 1000),
                                ("GET", key),
                                ("XREAD", "BLOCK", 5, "STREAMS", key + "s", "$"),
                            ]
                        )
                    else:
                        await conns.call(("XREAD", "BLOCK", 20, "STREAMS", key + "s", "$"))
                except (redis.ConnectionError, redis.TimeoutError):
                    failures["lost"] += 1
                except Exception as exc:
                    failures[f"{type(exc).__name__}: {exc}"] += 1

        tasks = [asyncio.create_task(busy(i)) for i in range(8)]
        rng = random.Random(13)
        for _ in range(300):
            await asyncio.sleep(rng.random() * 0.01)
            await conns.disconnect(in_use=True)
        stopping.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)
        await conns.disconnect(in_use=True)
        await client.aclose()
        return failures

    failures = asyncio.run(scenario())
    assert failures["lost"] > 0  # the interrupts did land under commands
    assert set(failures) == {"lost"}, failures


def test_commands_are_packed_as_redis_py_packs_them(server: RedisProcess) -> None:
    """hiredis packs straight; a spaced command name is split and what hiredis refuses goes
    through redis-py's packer, so the bytes sent are redis-py's."""
    with server.client() as r:
        conn = r.connection_pool.make_connection()
        cases: list[tuple[Any, ...]] = [
            ("XINFO GROUPS", "stream"),
            ("EVALSHA", "0" * 40, 1, "k", b"\x00\xff", "é", 12, 2.5),
            ("SET", "k", bytearray(b"v")),
            ("SET", "k", memoryview(b"v")),
        ]
        for args in cases:
            assert b"".join(pack(conn, args)) == b"".join(conn.pack_command(*args))
        assert b"".join(pack_all(conn, cases)) == b"".join(conn.pack_commands(cases))
