"""`memory://`: an in-process server on fakeredis, for tests and trials with nothing to run.

The store is a `fakeredis.FakeServer` with Lua (lupa), so the library's own scripts run on
it unchanged, sent by EVALSHA as to a real server. `memory://` is the process's default
store and `memory://NAME` another one: every client of the process that names it shares
it, and it lives as long as the process (or until `drop`).

It plugs in under redis-py, as a connection class: the library packs its commands itself
and writes them to the connection's socket, and fakeredis's socket runs each command as it
is written. It is built on fakeredis's private modules and methods: pyproject pins
fakeredis to the releases they are tested on, and tests/test_fakeredis_surface.py fails on
the first release that moves, renames or reshapes one. What fakeredis lacks is bridged here
and only here:

- `INFO` answers a server section of its own (the version check at connect) and the
  commands' call counts (`commandstats`, a script's own calls included, as on a server);
- `MEMORY USAGE` answers an estimate: the bytes of the key's contents, with a fixed
  overhead per key, per element and per pending entry (fakeredis has no such command);
- a script is compiled once, not at every call, and the garbage collector takes a step
  after each call rather than a full collection (fakeredis's cost three times the
  library's own Lua);
- `WAIT 0` answers 0; `WAIT n` for replicas refuses (a process has no replicas);
- `XREADGROUP` inside a script replies in the script's protocol (RESP2), as `redis.call`
  does on a server; fakeredis shapes it for the client's;
- a blocked `XREADGROUP` whose group or stream is deleted under it fails at once as on a
  real server (NOGROUP / UNBLOCKED) instead of waiting, then reading from the group that
  is gone;
- an error reply leaves no reference cycle behind (fakeredis's kept its traceback);
- a blocked asyncio read whose event loop closed does not break later writes;
- a connection woken by the library (`connections.wake`: closing a client, breaking a hung
  call) fails its blocked read as a lost connection, as a socket shut down does.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio as aioredis
from fakeredis import FakeServer
from fakeredis import _msgs as msgs
from fakeredis._clients._async import FakeAsyncRedisConnection, FakeReader, FakeWriter
from fakeredis._clients._sync import FakeRedisConnection
from fakeredis._helpers import NoResponse, SimpleError
from fakeredis._socket import AsyncFakeSocket, FakeSocket

from .urls import ServerUrl

VERSION = (7, 4)
"""The Redis version fakeredis follows for us (its command set and replies)."""
SERVER_INFO = (
    "# Server\r\n"
    f"redis_version:{'.'.join(map(str, VERSION))}.0\r\n"
    "redis_mode:standalone\r\n"
    "server_name:durables-memory\r\n"
    "executable:memory://\r\n"
).encode()
NO_REPLICAS = "NOREPLICAS memory:// has no replicas: publish(replicas=N) needs a server (redis://)"
KEY_GONE = "UNBLOCKED the stream key no longer exists"

_stores: dict[str, FakeServer] = {}
_lock = threading.Lock()


def store(name: str = "") -> FakeServer:
    """The store called `name` (`memory://NAME`; "" is `memory://`), made at first use."""
    with _lock:
        server = _stores.get(name)
        if server is None:
            server = _stores[name] = FakeServer(version=VERSION, server_type="redis")
        return server


def drop(name: str = "") -> None:
    """Forget the store `name`: the next client of `memory://NAME` starts empty (clients
    still open keep the old one)."""
    with _lock:
        _stores.pop(name, None)


def _calls(server: FakeServer) -> Counter[str]:
    """How often the store ran each command (`INFO commandstats`), kept on the store."""
    calls: Counter[str] | None = getattr(server, "durables_calls", None)
    if calls is None:
        calls = Counter()
        server.durables_calls = calls  # type: ignore[attr-defined]
    return calls


KEY_BYTES = 56
ELEMENT_BYTES = 16
PENDING_BYTES = 48
"""The estimate's overheads: per key, per element (a field, a member, an entry's id)
and per pending entry; about what a server's compact encodings spend."""


def _footprint(value: Any) -> int:
    """Estimated bytes of a value of the store: strings by their length; streams, hashes,
    sets and sorted sets by their elements, and a stream's pending entries."""
    if isinstance(value, bytes | bytearray | str):
        return len(value)
    if isinstance(value, int | float):
        return 8
    entries = getattr(value, "_values_dict", None)
    if entries is not None:  # a stream: its entries, then its groups' pending lists
        groups = getattr(value, "_groups", {}).values()
        pending = sum(len(group.pel) for group in groups)
        return sum(ELEMENT_BYTES + _footprint(list(v)) for v in entries.values()) + (
            PENDING_BYTES * pending
        )
    inner = getattr(value, "_values", value)  # fakeredis's hash keeps its fields there
    if isinstance(inner, dict):
        return sum(ELEMENT_BYTES + _footprint(k) + _footprint(v) for k, v in inner.items())
    try:
        return sum(ELEMENT_BYTES + _footprint(v) for v in inner)
    except TypeError:
        return ELEMENT_BYTES


def _no_group(stream: bytes, group: bytes) -> str:
    return (
        f"NOGROUP No such key '{stream.decode()}' or consumer group '{group.decode()}' "
        "in XREADGROUP with GROUP option"
    )


class _Gone:
    """What a blocked group read finds when its group or stream was deleted under it."""

    def __init__(self, message: str) -> None:
        self.message = message


def _flags_as_comment(source: bytes | str) -> bytes | str:
    """A script's `#!lua flags=...` line as a comment: fakeredis's Lua does not know it
    (a server reads it before the script runs; fakeredis never runs out of memory)."""
    if isinstance(source, bytes):
        return b"--" + source if source.startswith(b"#!") else source
    return "--" + source if source.startswith("#!") else source


class _CompiledScripts:
    """fakeredis's Lua runtime, but a script's source is compiled once and kept."""

    FULL_COLLECTION = "collectgarbage()"

    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime
        self._compiled: dict[bytes | str, Any] = {}

    def execute(self, source: bytes | str) -> Any:
        if source == self.FULL_COLLECTION:  # after every call: a step keeps up as well
            return self._runtime.execute("collectgarbage('step')")
        chunk = self._compiled.get(source)
        if chunk is None:
            chunk = self._compiled[source] = self._runtime.compile(_flags_as_comment(source))
        return chunk()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)


class _Bridge:
    """What a real server does and fakeredis does not, for a socket of each kind."""

    _db: Any
    _killed: bool
    _unblock_reason: bytes | None
    _blocked: bool
    _resp_version: int
    _server: FakeServer
    _woken = False

    def _process_command(self, fields: list[bytes]) -> None:
        name = fields[0].lower() if fields else b""
        if name == b"info":
            sections = [f.lower() for f in fields[1:]] or [b"default"]
            self.put_response(b"\r\n".join(self._info(section) for section in sections))
        elif name == b"wait" and len(fields) == 3:
            self.put_response(self._wait(fields[1]))
        elif name == b"memory" and len(fields) >= 3 and fields[1].lower() == b"usage":
            item = self._db.get(fields[2])
            self.put_response(None if item is None else KEY_BYTES + _footprint(item.value))
        else:
            super()._process_command(fields)  # type: ignore[misc]

    def put_response(self, msg: Any) -> None:
        super().put_response(msg)  # type: ignore[misc]

    def _get_server_runtime(self, server: FakeServer) -> Any:
        runtime = super()._get_server_runtime(server)  # type: ignore[misc]
        if not isinstance(runtime, _CompiledScripts):
            runtime = server._lua_runtime = _CompiledScripts(runtime)  # type: ignore[attr-defined]
        return runtime

    def _info(self, section: bytes) -> bytes:
        parts = []
        if section in (b"server", b"default", b"all", b"everything"):
            parts.append(SERVER_INFO)
        if section in (b"commandstats", b"all", b"everything"):
            calls = sorted(_calls(self._server).items())
            parts.append(
                b"# Commandstats\r\n"
                + b"".join(
                    f"cmdstat_{name}:calls={n},usec=0,usec_per_call=0.00,rejected_calls=0,"
                    f"failed_calls=0\r\n".encode()
                    for name, n in calls
                )
            )
        return b"\r\n".join(parts)

    def _run_command(self, func: Any, sig: Any, args: list[Any], from_script: bool) -> Any:
        # every command run, a script's own included (as a server's commandstats count)
        _calls(self._server)[sig.name.lower().replace(" ", "|")] += 1
        result = super()._run_command(func, sig, args, from_script)  # type: ignore[misc]
        if isinstance(result, SimpleError):
            # fakeredis keeps an error it caught as the reply: its traceback holds the frames
            # that hold the reply, a reference cycle per error reply (replies.kept, ours)
            result.__traceback__ = result.__context__ = None
        return result

    def _wait(self, replicas: bytes) -> Any:
        if replicas.strip() in (b"0", b"-0"):
            return 0
        return self._decode_error(SimpleError(NO_REPLICAS))  # type: ignore[attr-defined]

    def xreadgroup(self, const: bytes, group: bytes, consumer: bytes, *args: bytes) -> Any:
        try:
            return super().xreadgroup(const, group, consumer, *args)  # type: ignore[misc]
        except SimpleError as exc:
            if exc.value != msgs.XGROUP_KEY_NOT_FOUND_MSG:
                raise
            # fakeredis names XGROUP; Redis answers a read of a missing stream with NOGROUP,
            # naming that stream (a gated read tells a gone gate from a gone channel so)
            after = args[[a.upper() for a in args].index(b"STREAMS") + 1 :]
            streams = after[: len(after) // 2]
            missing = next((s for s in streams if self._db.get(s) is None), streams[0])
            raise SimpleError(_no_group(missing, group)) from None

    def _xreadgroup(
        self, consumer: bytes, group_params: list[Any], *args: Any, **kwargs: Any
    ) -> Any:
        # `group_params` holds the group objects the read began with: a group deleted (or
        # its stream) since must end the read, as Redis does, not keep dealing from it.
        for group, stream_name, _start in group_params:
            item = self._db.get(stream_name)
            stream = None if item is None else item.value
            if stream is None or not hasattr(stream, "group_get"):
                return _Gone(KEY_GONE)
            if stream.group_get(group.name) is not group:
                return _Gone(_no_group(stream_name, group.name))
        return super()._xreadgroup(consumer, group_params, *args, **kwargs)  # type: ignore[misc]

    def xgroup_destroy(self, key: Any, group: bytes) -> int:
        deleted: int = super().xgroup_destroy(key, group)  # type: ignore[misc]
        if deleted:  # wake the reads blocked on it, which fakeredis leaves to their timeout
            self._db.wake_all()
        return deleted

    def _xreadgroup_reply(self, res: Any) -> Any:
        if isinstance(res, _Gone):
            return SimpleError(res.message)
        if self._resp_version == 2:  # fakeredis asks the client's protocol, not a script's
            return [[k, v] for k, v in res.items()] if res else None
        return super()._xreadgroup_reply(res)  # type: ignore[misc]

    def shutdown(self, _how: Any) -> None:
        """`socket.shutdown` from another thread (`connections.wake`): a blocked read ends and
        the connection reads as lost; fakeredis's own closes a parser that may be running."""
        self._woken = True
        server = self._server
        # Only a blocked socket needs waking; and a socket the garbage collector shuts
        # down (redis-py's `__del__`) may do so inside a command that holds the lock.
        if self._blocked and server is not None:
            self._unblock_reason = b"timeout"
            with server.lock:
                self._db.wake_all()


class MemorySocket(_Bridge, FakeSocket):  # type: ignore[misc]  # _xreadgroup may say _Gone
    """A sync connection's end of the store."""


class AsyncMemorySocket(_Bridge, AsyncFakeSocket):  # type: ignore[misc]  # as MemorySocket
    """An asyncio connection's end of the store."""

    def _blocking(
        self,
        timeout: float | None,
        func: Callable[[bool], Any],
        shape: Callable[[Any], Any] | None = None,
    ) -> Any:
        """fakeredis's, but a read left blocked when its event loop closed (a client
        that was never closed) no longer fails every later write to the store: its
        wake-up, called by the writer, would raise "Event loop is closed" there."""
        loop = asyncio.get_running_loop()
        ret = func(True)
        if ret is not None or self._in_transaction:
            return ret if shape is None else shape(ret)
        event = asyncio.Event()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(event.set)

        self._db.add_change_callback(wake)
        self._blocked = True
        self.pause()
        self._task = loop.create_task(self._async_blocking(timeout, func, event, wake, shape))
        return NoResponse()


def _open(server: FakeServer | None) -> FakeServer:
    if server is None or not server.connected:
        raise redis.ConnectionError("the memory:// store is closed")
    return server


class MemoryConnection(FakeRedisConnection):
    """redis-py's connection to a store (`connection_class` of its pool)."""

    def _connect(self) -> MemorySocket:
        return MemorySocket(
            _open(self._server),
            client_class=self._client_class,
            db=self.db,
            lua_modules=self._lua_modules,
            client_info=self._client_info,
        )

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        sock = self._sock
        if isinstance(sock, MemorySocket) and sock._woken:
            self.disconnect()
            raise redis.ConnectionError("the connection was shut down while in use")
        return super().read_response(*args, **kwargs)


class AsyncMemoryConnection(FakeAsyncRedisConnection):
    """redis-py's asyncio connection to a store."""

    async def _connect(self) -> None:
        self._sock = AsyncMemorySocket(
            _open(self._server),
            self.db,
            client_class=self._client_class,
            lua_modules=self._lua_modules,
            client_info=self._client_info,
        )
        self._reader = FakeReader(self._sock)
        self._writer = FakeWriter(self._sock)


_POOL_OPTIONS = ("socket_timeout", "socket_connect_timeout", "retry")
"""redis-py's options that mean something in a process (no TLS, no keepalive)."""


def open_sync(url: ServerUrl, options: dict[str, Any]) -> redis.Redis:
    """A redis-py client of the store `url` names (`transport.OPENERS`)."""
    kept = {k: v for k, v in options.items() if k in _POOL_OPTIONS}
    pool = redis.ConnectionPool(
        connection_class=MemoryConnection, server=store(url.service or ""), **kept
    )
    return redis.Redis(connection_pool=pool)


def open_async(url: ServerUrl, options: dict[str, Any]) -> aioredis.Redis:
    """An asyncio redis-py client of the store `url` names (`aio.transport.connect`)."""
    kept = {k: v for k, v in options.items() if k in _POOL_OPTIONS and k != "retry"}
    pool = aioredis.ConnectionPool(
        connection_class=AsyncMemoryConnection, server=store(url.service or ""), **kept
    )
    return aioredis.Redis(connection_pool=pool)


__all__ = [
    "VERSION", "AsyncMemoryConnection", "MemoryConnection", "drop", "open_async", "open_sync",
    "store",
]  # fmt: skip
