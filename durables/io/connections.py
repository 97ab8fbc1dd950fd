"""Commands sent straight over connections of a redis-py client, without its per-call layers.

redis-py's `execute_command` and `Pipeline.execute` wrap every call in layers the
executor does not use (a retry policy of its own, observability hooks, event
dispatch, per-call options), and its pool books every loan under a lock with more
hooks: together about 20 µs of client time per round trip on a 2-core machine, more
than our own code spends to build a single publish. `Connections` keeps its own free
list of connections made by the client's pool (so they connect as the pool's do:
TLS, credentials, a Sentinel's current primary), sends packed commands and reads the
replies through the client's own `parse_response`, so every reply is parsed exactly
as redis-py would (its response callbacks and ours for stream reads, its error
classes, the Sentinel connection's READONLY handling).

Waking a busy connection needs two things redis-py has no public name for: a
connection's socket and a pool's lent connections. `socket_of` and `lent` are the only
reads of redis-py's private surface; pyproject pins redis-py to the releases they are
tested on, and tests/test_redis_py_surface.py fails on the first release that changes them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import hiredis
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..reply_parsers import kept

Conn = Any
"""A redis-py connection (`redis.connection.AbstractConnection`, whose methods are untyped)."""


def pack(conn: Conn, args: Sequence[Any]) -> list[bytes]:
    """A command as sent, packed by hiredis (a dependency, and then redis-py's packer too)
    without redis-py's look at every argument in Python first (0.3 µs per event of a batch
    publish). A command name with a space is split, as redis-py does (`XINFO GROUPS`);
    anything hiredis refuses (a bytearray, a memoryview) goes through redis-py's packer."""
    wire: Any = args
    try:
        if " " in wire[0]:
            wire = (*wire[0].split(), *wire[1:])
        return [hiredis.pack_command(wire)]
    except TypeError:
        packed: list[bytes] = conn.pack_command(*args)
        return packed


def pack_all(conn: Conn, commands: Sequence[Sequence[Any]]) -> list[bytes]:
    """Commands of one pipeline as sent (see `pack`), in one buffer."""
    return [b"".join(part for args in commands for part in pack(conn, args))]


def wake(conn: Conn) -> None:
    """Shut a connection's socket down without closing it: a thread blocked reading it
    wakes with an error at once and closes the connection itself. Closed from another
    thread, its descriptor would be free for a new socket to take before the owner's
    read began, and that read would wait on another connection's socket (a reader hung
    for the whole socket timeout this way when a paused server came back)."""
    sock = socket_of(conn)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def wake_pool(pool: Any) -> None:
    """A redis-py pool's idle connections closed, those in use woken (`wake`)."""
    pool.disconnect(inuse_connections=False)
    for conn in lent(pool):
        wake(conn)


def socket_of(conn: Conn) -> socket.socket | None:
    """A redis-py connection's socket (its private `_sock`), None while not connected."""
    sock: socket.socket | None = conn._sock
    return sock


def lent(pool: Any) -> Iterable[Conn]:
    """The connections a redis-py pool has lent and not had back: a copy its private
    `_get_in_use_connections` takes under the pool's lock."""
    conns: Iterable[Conn] = pool._get_in_use_connections()
    return conns


class Connections:
    """A thread-safe free list of connections to the server of `client`."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._parse: Any = client.parse_response  # untyped in redis-py
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._idle: list[Conn] = []
        self._made: list[Conn] = []
        self._shut = False

    def _give_back(self, conn: Conn) -> None:
        """Back on the free list; closed instead once the client is (the check comes
        after the append, so a `close` at the same moment cannot miss it)."""
        self._idle.append(conn)
        if self._shut:
            self._close_idle()

    def call(self, args: Sequence[Any]) -> Any:
        """One command; its parsed reply, or the error reply raised (a `ResponseError`)."""
        conn = self._take()
        try:
            conn.send_packed_command(pack(conn, args), check_health=False)
            reply = self._parse(conn, args[0])
        except ResponseError:
            self._give_back(conn)  # an error reply: the connection is in step
            raise
        except BaseException:
            conn.disconnect()  # a reply may be left unread
            self._give_back(conn)
            raise
        self._give_back(conn)
        return reply

    def pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Commands in one round trip; their parsed replies in order, error replies as
        `ResponseError`s in their place (every command runs whatever the others reply)."""
        return self.collect(self.post(commands), commands)

    def post(self, commands: Sequence[Sequence[Any]]) -> Conn:
        """Commands sent, their replies left to read (`collect`): the connection they are
        on stays out of the free list until then."""
        conn = self._take()
        try:
            conn.send_packed_command(pack_all(conn, commands), check_health=False)
        except BaseException:
            conn.disconnect()  # part of it may have gone
            self._give_back(conn)
            raise
        return conn

    def collect(self, conn: Conn, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """The replies of `commands` `post`ed on `conn` (as `pipeline` gives them), and the
        connection back on the free list."""
        try:
            replies: list[Any] = []
            parse = self._parse
            for args in commands:
                try:
                    replies.append(parse(conn, args[0]))
                except ResponseError as exc:
                    replies.append(kept(exc))
        except BaseException:
            conn.disconnect()  # replies may be left unread
            self._give_back(conn)
            raise
        self._give_back(conn)
        return replies

    def _take(self) -> Conn:
        """An idle connection ready to send (`list.pop` is atomic), or a new one."""
        if self._pid != os.getpid():  # a forked child must not share its parent's sockets
            with self._lock:
                if self._pid != os.getpid():
                    self._reset()
        try:
            conn = self._idle.pop()
        except IndexError:
            conn = self.client.connection_pool.make_connection()
            with self._lock:
                self._made.append(conn)
        try:
            if conn.is_connected and _stale(conn):
                conn.disconnect()
            if not conn.is_connected:
                conn.connect()  # a Sentinel's connection asks for the current primary here
        except BaseException:
            self._give_back(conn)  # not connected: it tries again when next taken
            raise
        return conn

    def disconnect(self, *, in_use: bool) -> None:
        """Close the idle connections' sockets (they connect again as they next send), and
        with `in_use` wake the busy ones (`wake`): a thread blocked on a black-holed
        socket gets an error at once."""
        if in_use:
            with self._lock:
                made = list(self._made)
            for conn in made:
                wake(conn)
        self._close_idle()

    def close(self) -> None:
        """Every connection closed: idle ones here, busy ones woken and closed by the
        thread using them as it gives them back."""
        self._shut = True
        self.disconnect(in_use=True)

    def _close_idle(self) -> None:
        drained: list[Conn] = []
        while True:  # taken off the list first, so no thread is using one as it closes
            try:
                drained.append(self._idle.pop())
            except IndexError:
                break
        for conn in drained:
            conn.disconnect()
        self._idle.extend(drained)


def _stale(conn: Conn) -> bool:
    """Whether an idle connection must be renewed before use: the server closed it, or
    data waits on it (a reply left unread). redis-py's pool renews such a connection
    instead of failing the call, and so do we."""
    try:
        return bool(conn.can_read())
    except (RedisConnectionError, RedisTimeoutError, OSError):
        return True


__all__ = ["Connections", "lent", "socket_of", "wake", "wake_pool"]
