"""`durables.io.connections` for the asyncio client: commands straight over connections of a
redis-py asyncio client, without its per-call layers (its retry wrapper, observability
hooks, event dispatch, the pool's locked bookkeeping).

The connections are made by the client's pool (so they connect as its own do: TLS,
credentials, a Sentinel's current primary) and kept on a free list of ours; replies are
read through the client's own `parse_response`; commands are packed as the sync ones
are (`durables.io.connections.pack`). One event loop uses them, so the list
needs no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ...reply_parsers import kept
from ..connections import pack, pack_all

Conn = Any
"""A redis-py asyncio connection (`redis.asyncio.connection.AbstractConnection`, whose
methods are untyped)."""


@contextlib.contextmanager
def closed_is_lost() -> Iterator[None]:
    """A connection closed by another task in the middle of a command is a lost
    connection. An interrupt (a heartbeat unanswered) closes every connection, those in
    use too, and redis-py's asyncio connection then fails with AttributeError (its writer
    or reader is None) instead of a ConnectionError when the close lands between two of
    its steps."""
    try:
        yield
    except AttributeError as exc:
        if exc.obj is not None:
            raise
        raise RedisConnectionError(f"the connection was closed under the command: {exc}") from exc


class AsyncConnections:
    """A free list of connections to the server of `client`."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self._parse: Any = client.parse_response  # untyped in redis-py
        self._idle: list[Conn] = []
        self._made: list[Conn] = []

    async def call(self, args: Sequence[Any]) -> Any:
        """One command; its parsed reply, or the error reply raised (a `ResponseError`)."""
        conn = await self._take()
        try:
            with closed_is_lost():
                await conn.send_packed_command(pack(conn, args), check_health=False)
                reply = await self._parse(conn, args[0])
        except ResponseError:
            self._idle.append(conn)  # an error reply: the connection is in step
            raise
        except BaseException:  # a cancellation too: a reply may be left unread
            await conn.disconnect(nowait=True)
            self._idle.append(conn)
            raise
        self._idle.append(conn)
        return reply

    async def pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Commands in one round trip; their parsed replies in order, error replies as
        `ResponseError`s in their place (every command runs whatever the others reply)."""
        return await self.collect(await self.post(commands), commands)

    async def post(self, commands: Sequence[Sequence[Any]]) -> Conn:
        """Commands sent, their replies left to read (`collect`): the connection they are
        on stays out of the free list until then."""
        conn = await self._take()
        try:
            with closed_is_lost():
                await conn.send_packed_command(pack_all(conn, commands), check_health=False)
        except BaseException:  # a cancellation too: part of it may have gone
            await conn.disconnect(nowait=True)
            self._idle.append(conn)
            raise
        return conn

    async def collect(self, conn: Conn, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """The replies of `commands` `post`ed on `conn` (as `pipeline` gives them), and the
        connection back on the free list."""
        try:
            with closed_is_lost():
                replies: list[Any] = []
                parse = self._parse
                for args in commands:
                    try:
                        replies.append(await parse(conn, args[0]))
                    except ResponseError as exc:
                        replies.append(kept(exc))
        except BaseException:  # a cancellation too: replies may be left unread
            await conn.disconnect(nowait=True)
            self._idle.append(conn)
            raise
        self._idle.append(conn)
        return replies

    async def _take(self) -> Conn:
        """An idle connection ready to send, or a new one."""
        try:
            conn = self._idle.pop()
        except IndexError:
            conn = self.client.connection_pool.make_connection()  # type: ignore[no-untyped-call]
            self._made.append(conn)
        try:
            with closed_is_lost():
                if conn.is_connected and await _stale(conn):
                    await conn.disconnect()
                if not conn.is_connected:
                    await conn.connect()  # a Sentinel's connection asks for the current primary
        except BaseException:
            self._idle.append(conn)  # not connected: it tries again when next taken
            raise
        return conn

    async def disconnect(self, *, in_use: bool) -> None:
        """Close the idle connections (they connect again as they next send), and with
        `in_use` the busy ones too: a task waiting on a black-holed socket wakes at once."""
        if in_use:
            await _all_closed(list(self._made))
            return
        drained, self._idle = self._idle, []  # off the list first: no task takes one as it closes
        try:
            await _all_closed(drained)
        finally:
            self._idle.extend(drained)


async def _all_closed(conns: list[Conn]) -> None:
    """Close every connection at once, as redis-py's pool does (each may wait out a dead
    socket); the first error, if any, raised once all are done."""
    results = await asyncio.gather(*(c.disconnect() for c in conns), return_exceptions=True)
    error = next((r for r in results if isinstance(r, BaseException)), None)
    if error is not None:
        raise error


async def _stale(conn: Conn) -> bool:
    """Whether an idle connection must be renewed before use: the server closed it, or data
    waits on it (a reply left unread), as redis-py's pool checks."""
    try:
        return bool(await conn.can_read())
    except (RedisConnectionError, RedisTimeoutError, OSError):
        return True


__all__ = ["AsyncConnections", "closed_is_lost"]
