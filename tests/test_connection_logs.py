"""What a client logs of its connection: one line per change of the server connection's
state, from the client's own connection (a helper's, the heartbeat's, says nothing of its
own: it would say the same again, or call its own closing the server's)."""

from __future__ import annotations

import logging
import time

import pytest

from .conftest import FAST, Connect
from .helpers import wait_for
from .servers import RedisProcess

pytestmark = pytest.mark.both_clients


def _connection_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "durables.io.executor" and r.levelno >= logging.INFO
    ]


def test_a_server_restart_logs_each_change_of_the_connection_once(
    fresh_server: RedisProcess, namespace: str, connect: Connect, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="durables")
    settings = {**FAST, "reconnect_timeout_s": 30.0}
    with connect(fresh_server.url, namespace=namespace, **settings) as client:
        ch = client.channel("orders")
        fresh_server.kill9()
        # the heartbeat fails (and breaks the client's connections), then fails again
        assert wait_for(lambda: client.state == "reconnecting", timeout=10)
        time.sleep(FAST["lease_timeout_s"])
        fresh_server.restart()
        ch.publish("back")  # waits out the rest of the outage
        assert client.state == "connected"
        time.sleep(FAST["lease_timeout_s"])  # the heartbeat beats again
    assert _connection_lines(caplog) == [
        "server connection: connected -> reconnecting",
        "server connection: reconnecting -> connected",
    ]
