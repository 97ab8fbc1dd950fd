"""The private names of fakeredis that `durables.memory` uses (its private modules, the
private methods it overrides or calls, the state it reads), checked against the installed
fakeredis: a release that renames, moves or reshapes one fails here, by name, in every pass,
before memory:// misbehaves somewhere less clear. pyproject pins fakeredis to the range
checked here; widening it starts with this file passing on the new release."""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Callable, Iterator
from importlib.metadata import version
from typing import Any

import pytest
import redis

from durables import memory
from durables.reply_parsers import raw
from durables.urls import parse_url

PRIVATE_NAMES = {
    "fakeredis._msgs": ["XGROUP_KEY_NOT_FOUND_MSG"],
    "fakeredis._clients._async": ["FakeAsyncRedisConnection", "FakeReader", "FakeWriter"],
    "fakeredis._clients._sync": ["FakeRedisConnection"],
    "fakeredis._helpers": ["NoResponse", "SimpleError"],
    "fakeredis._socket": ["AsyncFakeSocket", "FakeSocket"],
}
"""The private modules `durables.memory` imports, and what it takes from each."""

SOCKET = "fakeredis._socket.FakeSocket"
ASYNC_SOCKET = "fakeredis._socket.AsyncFakeSocket"
SYNC_CONNECTION = "fakeredis._clients._sync.FakeRedisConnection"
ASYNC_CONNECTION = "fakeredis._clients._async.FakeAsyncRedisConnection"

SIGNATURES = {
    # overridden by memory._Bridge (on both sockets), calling fakeredis's own
    (SOCKET, "_process_command"): "(self, fields)",
    (SOCKET, "put_response"): "(self, msg)",
    (SOCKET, "_get_server_runtime"): "(self, server)",
    (SOCKET, "_run_command"): "(self, func, sig, args, from_script)",
    (SOCKET, "xreadgroup"): "(self, group_const, group_name, consumer_name, *args)",
    (SOCKET, "_xreadgroup"): "(self, consumer_name, group_params, count, maxcount, maxsize, "
                             "noack, min_idle_time, blocking)",
    (SOCKET, "xgroup_destroy"): "(self, key, group_name)",
    (SOCKET, "_xreadgroup_reply"): "(self, res)",
    (SOCKET, "shutdown"): "(self, _)",
    # called by the bridge
    (SOCKET, "_decode_error"): "(self, error)",
    # overridden by memory.AsyncMemorySocket, which calls these
    (ASYNC_SOCKET, "_blocking"): "(self, timeout, func, shape=None)",
    (ASYNC_SOCKET, "_async_blocking"): "(self, timeout, func, event, callback, shape=None)",
    (ASYNC_SOCKET, "pause"): "(self)",
    # overridden by memory.MemoryConnection and AsyncMemoryConnection
    (SYNC_CONNECTION, "_connect"): "(self)",
    (SYNC_CONNECTION, "read_response"): "(self, **kwargs)",
    (ASYNC_CONNECTION, "_connect"): "(self)",
    # made by memory.store
    ("fakeredis.FakeServer", "__init__"): "(self, version=(8,), server_type='redis', "
                                          "config=None)",
}  # fmt: skip
"""Each private method durables overrides or calls, with its parameters (annotations left
out) as the pinned fakeredis has them: `durables.memory` calls them so."""


def _find(dotted: str) -> Any:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _shape(function: Callable[..., Any]) -> str:
    """A signature without its annotations: the names, kinds and defaults callers rely on."""
    signature = inspect.signature(function)
    params = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=params, return_annotation=inspect.Signature.empty))


def test_the_installed_fakeredis_is_in_the_pinned_range() -> None:
    major, minor = (int(part) for part in version("fakeredis").split(".")[:2])
    assert (2, 41) <= (major, minor) < (2, 42)


@pytest.mark.parametrize("module", sorted(PRIVATE_NAMES))
def test_each_private_module_has_what_memory_takes_from_it(module: str) -> None:
    found = importlib.import_module(module)
    assert [name for name in PRIVATE_NAMES[module] if not hasattr(found, name)] == []


@pytest.mark.parametrize(
    ("owner", "method"),
    sorted(SIGNATURES),
    ids=[f"{o.rsplit('.', 1)[1]}.{m}" for o, m in sorted(SIGNATURES)],
)
def test_each_private_method_durables_overrides_or_calls_keeps_its_signature(
    owner: str, method: str
) -> None:
    function = getattr(_find(owner), method, None)
    assert function is not None, f"{owner}.{method} is gone"
    assert _shape(function) == SIGNATURES[owner, method], f"{owner}.{method} changed"


def test_the_bridge_overrides_only_methods_fakeredis_has() -> None:
    """A method of the bridge that no longer overrides anything is never called."""
    bridged = [name for name in vars(memory._Bridge) if callable(vars(memory._Bridge)[name])]
    own = {"_info", "_wait"}  # the bridge's own helpers
    socket = _find(SOCKET)
    assert [name for name in bridged if name not in own and not hasattr(socket, name)] == []
    assert {(SOCKET, name) for name in bridged if name not in own} <= set(SIGNATURES)


@pytest.fixture
def store() -> Iterator[tuple[redis.Redis, Any]]:
    """A client of a store of its own, and the socket behind one of its connections."""
    pool = redis.ConnectionPool(
        connection_class=memory.MemoryConnection, server=memory.store("surface")
    )
    client = redis.Redis(connection_pool=pool)
    conn: Any = pool.get_connection()
    try:
        conn.connect()
        yield client, conn
    finally:
        pool.release(conn)
        client.close()
        memory.drop("surface")


def test_the_state_memory_reads_is_where_it_reads_it(store: tuple[redis.Redis, Any]) -> None:
    client, conn = store
    for name in ("_server", "_client_class", "db", "_lua_modules", "_client_info", "_sock"):
        assert hasattr(conn, name), f"a connection has no {name}"
    sock = conn._sock
    assert isinstance(sock, memory.MemorySocket)
    for name in ("_db", "_blocked", "_unblock_reason", "_resp_version", "_server"):
        assert hasattr(sock, name), f"a socket has no {name}"
    server = sock._server
    assert hasattr(server, "lock") and server.connected is True
    for name in ("get", "wake_all", "add_change_callback"):
        assert callable(getattr(sock._db, name, None)), f"a database has no {name}()"

    client.xadd("s", {"f": "v"})
    client.xgroup_create("s", "g", "0")
    client.xreadgroup("g", "c", {"s": ">"})
    client.hset("h", "f", "v")
    stream, kept = sock._db.get(b"s").value, sock._db.get(b"h").value
    assert hasattr(stream, "_values_dict") and hasattr(stream, "_groups")  # memory._footprint
    group = stream.group_get(b"g")
    assert group.name == b"g" and len(group.pel) == 1
    assert dict(kept._values) == {b"f": b"v"}
    assert raw(client, "MEMORY", "USAGE", "s") > memory.KEY_BYTES

    client.eval("return 1", 0)  # the runtime is made at the first script, then wrapped
    runtime = getattr(server, "_lua_runtime", None)
    assert isinstance(runtime, memory._CompiledScripts)
    assert callable(runtime._runtime.compile) and callable(runtime._runtime.execute)


def test_a_group_read_of_a_missing_stream_still_says_what_the_bridge_rewrites(
    store: tuple[redis.Redis, Any],
) -> None:
    """fakeredis answers it with its XGROUP message (`_msgs`), which the bridge turns into
    Redis's NOGROUP naming the stream."""
    client, _ = store
    client.xgroup_create("there", "g", "$", mkstream=True)
    with pytest.raises(redis.ResponseError, match="NOGROUP No such key 'gone'"):
        client.xreadgroup("g", "c", {"gone": ">"})


def test_an_asyncio_connection_is_made_of_the_parts_memory_sets() -> None:
    async def main() -> list[str]:
        client = memory.open_async(parse_url("memory://surface-aio"), {})
        conn: Any = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            await conn.connect()
            assert isinstance(conn._sock, memory.AsyncMemorySocket)
            return [
                name
                for name in (
                    "_reader",
                    "_writer",
                    "_server",
                    "db",
                    "_client_class",
                    "_lua_modules",
                    "_client_info",
                )
                if not hasattr(conn, name)
            ]
        finally:
            await client.connection_pool.release(conn)
            await client.aclose()

    assert asyncio.run(main()) == []
    memory.drop("surface-aio")
