"""A server busy running a long script (another client's: a Spark sink's commit of a large
batch, say) answers every other command with BUSY until the script ends. The library
treats that as a short outage: the heartbeat keeps its leases, and a publish waits and is
stored once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

import durables

from .conftest import FAST, SERVER_KIND, Connect
from .secure import SECURE, secure
from .servers import HOST, RedisProcess, server_binary

pytestmark = pytest.mark.both_clients

BUSY_FOR_S = 1.5
LEASE_S = 3.0
SPIN = """
local function now() local t = redis.call('TIME') return t[1] * 1e6 + t[2] end
local started = now()
repeat until now() - started > tonumber(ARGV[1])
return 1
"""
"""A script that keeps the server for ARGV[1] microseconds."""


@pytest.fixture
def busy_server(tmp_path: Path, certificates: Path) -> Iterator[RedisProcess]:
    """A server that answers BUSY 100 ms into a script (the default is 5 s)."""
    proc = RedisProcess(
        server_binary(SERVER_KIND), tmp_path / "srv", extra={"lua-time-limit": "100"}
    )
    with secure(proc, certificates) if SECURE else proc:
        yield proc


def spin(server: RedisProcess) -> threading.Thread:
    """Keep the server busy for BUSY_FOR_S from another connection, in a thread."""

    def run() -> None:
        with redis.Redis(host=HOST, port=server.port, socket_timeout=10 * BUSY_FOR_S) as admin:
            admin.eval(SPIN, 0, int(BUSY_FOR_S * 1e6))

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.3)  # past the threshold: the server answers BUSY from here on
    return thread


def test_a_busy_server_is_waited_out_the_leases_kept_and_a_publish_stored_once(
    connect: Connect, busy_server: RedisProcess, namespace: str
) -> None:
    settings = {**FAST, "lease_timeout_s": LEASE_S}
    with connect(busy_server.url, namespace=namespace, **settings) as client:
        channel = client.channel("orders")
        durable = channel.durable("billing")
        channel.publish(b"before")
        with durable.consumer() as consumer:
            assert [e.data for e in consumer.fetch(timeout=2.0)] == [b"before"]
            consumer.commit()
            spinning = spin(busy_server)
            started = time.monotonic()
            channel.publish(b"during")  # waits for the script, then goes through once
            waited = time.monotonic() - started
            spinning.join()
            # Past a whole lease since the server came back: only beats after BUSY kept it.
            time.sleep(LEASE_S + 0.5)
            with (
                connect(busy_server.url, namespace=namespace, **settings) as other,
                pytest.raises(durables.DurableInUseError),
            ):
                other.channel("orders").durable("billing").consumer().close()
            [during] = consumer.fetch(timeout=2.0)
            consumer.commit()
        assert during.data == b"during" and during.redelivery_count == 0
        assert waited >= BUSY_FOR_S - 0.5, "the publish did not meet the busy server"
        assert channel.info().length == 2  # stored once
