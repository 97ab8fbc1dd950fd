"""The two private names of redis-py that `durables.io.connections` reads (a connection's socket, a
pool's lent connections), checked against the installed redis-py: a release that renames
or changes either fails here, in the normal suite, before an interrupt silently stops
waking blocked calls."""

from __future__ import annotations

import socket
import threading
from importlib.metadata import version
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from durables.io.connections import lent, socket_of, wake_pool

from .servers import HOST, RedisProcess


def _pool(server: RedisProcess) -> redis.ConnectionPool:
    """No retries: a woken call must fail, not be sent again on a new connection."""
    return redis.ConnectionPool(
        host=HOST, port=server.port, socket_timeout=30, retry=Retry(NoBackoff(), 0)
    )


def test_the_installed_redis_py_is_in_the_pinned_range() -> None:
    major, minor = (int(part) for part in version("redis").split(".")[:2])
    assert (8, 1) <= (major, minor) < (9, 0)


def test_a_connection_shows_its_socket_while_connected_and_none_once_closed(
    server: RedisProcess,
) -> None:
    pool = _pool(server)
    conn: Any = pool.make_connection()
    assert socket_of(conn) is None
    conn.connect()
    sock = socket_of(conn)
    assert isinstance(sock, socket.socket)
    assert sock.getpeername()[1] == server.port
    conn.disconnect()
    assert socket_of(conn) is None
    assert sock.fileno() == -1


def test_a_pool_lists_exactly_the_connections_it_has_lent(server: RedisProcess) -> None:
    pool = _pool(server)
    first, second = pool.get_connection(), pool.get_connection()
    assert set(lent(pool)) == {first, second}
    pool.release(first)
    assert set(lent(pool)) == {second}
    pool.release(second)
    assert set(lent(pool)) == set()
    pool.disconnect()


def test_waking_a_pool_ends_a_call_blocked_on_one_of_its_connections(
    server: RedisProcess, namespace: str
) -> None:
    client = redis.Redis(connection_pool=_pool(server), retry=Retry(NoBackoff(), 0))
    failed: list[BaseException] = []

    def blocked() -> None:
        try:
            client.blpop([f"{namespace}:nothing"], timeout=20)
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=blocked)
    thread.start()
    with server.client() as admin:  # wait until the server has it blocked
        for _ in range(500):
            if admin.info("clients")["blocked_clients"] >= 1:
                break
            threading.Event().wait(0.01)
    wake_pool(client.connection_pool)
    thread.join(timeout=5)
    assert not thread.is_alive(), "the blocked call did not wake"
    assert failed and isinstance(failed[0], (redis.ConnectionError, OSError))
    assert client.ping() is True  # the pool connects again
    client.close()
