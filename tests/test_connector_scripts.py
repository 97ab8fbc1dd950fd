"""A connector's scripts (Spark's, in `durables/spark/lua/`): not loaded by every client at
connect, loaded by the connector when it adds them, and loaded again with the library's own
after the server lost them. Neither needs pyspark: the scripts are read as data."""

from __future__ import annotations

import asyncio

from durables import aio, connect, scripts
from durables.reply_parsers import raw

from .servers import RedisProcess

SPARK = scripts.names_in("spark")


def _loaded(server: RedisProcess, names: tuple[str, ...]) -> list[int]:
    """Which of `names` the server knows, asked as the default user (SCRIPT EXISTS is no
    command durables sends, so the TLS pass's least-privilege user may not)."""
    with server.client() as admin:
        return list(raw(admin, "SCRIPT", "EXISTS", *(scripts.sha(name) for name in names)))


def test_the_spark_scripts_live_with_spark_and_not_among_the_librarys() -> None:
    assert SPARK == ("spark/ack", "spark/commit", "spark/plan")
    assert not set(SPARK) & set(scripts.NAMES)
    assert not [name for name in scripts.NAMES if name.startswith("spark")]
    for name in SPARK:  # spliced and trimmed as the library's own are
        lines = scripts.source(name).splitlines()
        assert lines[0].startswith("#!lua") and lines[1].startswith("-- ")
        assert not [line for line in lines if line.startswith("--@include")]


def flush_scripts(server: RedisProcess) -> None:
    """The server forgets every script (as after a restart), flushed as the default user:
    the TLS pass's least-privilege user may not."""
    with server.client() as admin:
        raw(admin, "SCRIPT", "FLUSH")


def test_connect_loads_the_librarys_scripts_and_added_ones_come_back_after_a_flush(
    server: RedisProcess, server_url: str, namespace: str
) -> None:
    flush_scripts(server)
    with connect(server_url, namespace=namespace) as client:
        executor = client.ctx.executor
        assert _loaded(server, scripts.NAMES) == [1] * len(scripts.NAMES)
        assert _loaded(server, SPARK) == [0, 0, 0]
        executor.add_scripts(SPARK)
        assert _loaded(server, SPARK) == [1, 1, 1]
        executor.add_scripts(SPARK)  # known: no round trip, nothing added twice
        assert executor._scripts.count("spark/plan") == 1
        flush_scripts(server)
        client.channel("orders").publish(b"x")  # NOSCRIPT: every script loaded again
        assert _loaded(server, (*scripts.NAMES, *SPARK)) == [1] * (len(scripts.NAMES) + len(SPARK))


def test_the_asyncio_executor_adds_scripts_the_same_way(
    server: RedisProcess, server_url: str, namespace: str
) -> None:
    async def main() -> list[int]:
        client = await aio.connect(server_url, namespace=namespace)
        try:
            executor = client.ctx.executor
            await executor.add_scripts(SPARK)
            flush_scripts(server)
            await (await client.channel("orders")).publish(b"x")  # NOSCRIPT: all again
            return _loaded(server, SPARK)
        finally:
            await client.close()

    assert asyncio.run(main()) == [1, 1, 1]
