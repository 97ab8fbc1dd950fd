"""The sync and the asyncio client send byte-identical commands for the same calls.

Both share every `Op` (command building, Lua calls, parsers); this checks it down to the
socket: the bytes each client's redis-py connections send are recorded for one scenario
written once against the sync API (run on the asyncio client through the bridge), on a
server of the test's own, with the random parts (consumer tokens, the local clock) fixed.
What the server chooses (event ids, its clock) is replaced by placeholders.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
import redis.asyncio.connection as async_connection
import redis.connection as sync_connection

import durables

from . import aio_bridge
from .servers import RedisProcess

SETTINGS: dict[str, Any] = {"lease_timeout_s": 30.0, "block_s": 0.2, "housekeep_interval_s": 3600.0}
"""Long leases: no heartbeat beats and no fence is needed while the scenario runs."""
HANDSHAKE = (b"CLIENT", b"HELLO", b"SELECT", b"PING")
SERVER_CHOSEN = re.compile(rb"\$\d+\r\n\d{13}(-\d+)?\r\n")
"""A bulk string holding an event id or a millisecond time: chosen by the server's clock."""


def scenario(client: durables.Client) -> None:
    """Publishing, durables of each kind, consumers, acks, rollbacks, depths, housekeeping,
    a session; every fetch finds its events waiting, so no wait depends on timing."""
    ch = client.channel("orders", keyed=True, capacity=100)
    ch.publish(b"one", key="k1", properties={"region": "eu", "qty": 3})
    ch.publish_many([durables.Message(f"e{i}", properties={"i": i}) for i in range(5)])
    audit = ch.durable("audit")
    work = ch.durable("work", kind="shared", filter="i >= 1")
    line = ch.durable("line", kind="serial", max_deliveries=3)
    with audit.consumer("a", auto_ack=False) as c:
        got = c.fetch(timeout=5)
        got[2].ack()
        got[3].rollback()
        c.commit()
    with work.consumer("w", prefetch=2) as c:
        first = c.fetch(timeout=5)
        first[0].rollback()
        c.commit()
    with line.consumer("s") as c:
        c.fetch(timeout=5)
    assert audit.depth() >= 0 and work.transaction_depth() >= 0
    audit.info()
    ch.info()
    client.channels()
    ch.last_values()
    with client.session("phone", timeout=30) as s:
        s.register_interest("orders", ["k1"])
        s.put("orders", "k2", b"v")
    client.housekeep()
    ch.purge()
    work.delete()
    ch.delete()


class Recorder:
    """Records what every redis-py connection (sync and asyncio) sends, in order."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def note(self, command: bytes | str | Iterable[bytes]) -> None:
        if isinstance(command, str):
            command = command.encode()
        data = command if isinstance(command, bytes) else b"".join(command)
        for one in _commands(data):
            if not any(b"\r\n" + word + b"\r\n" in one[:40] for word in HANDSHAKE):
                self.sent.append(one)


def _commands(data: bytes) -> Iterator[bytes]:
    """Split packed RESP arrays into one command each (pipelines send several at once)."""
    pos = 0
    while pos < len(data):
        end = data.index(b"\r\n", pos)
        count = int(data[pos + 1 : end])
        cursor = end + 2
        for _ in range(count):
            size_end = data.index(b"\r\n", cursor)
            size = int(data[cursor + 1 : size_end])
            cursor = size_end + 2 + size + 2
        yield data[pos:cursor]
        pos = cursor


def _normal(sent: list[bytes]) -> list[bytes]:
    return [SERVER_CHOSEN.sub(b"<server-chosen>", one) for one in sent]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    rec = Recorder()
    sync_send = sync_connection.AbstractConnection.send_packed_command
    async_send = async_connection.AbstractConnection.send_packed_command

    def sync_recording(self: Any, command: Any, check_health: bool = True) -> None:
        rec.note(command)
        sync_send(self, command, check_health)  # type: ignore[no-untyped-call]

    async def async_recording(self: Any, command: Any, check_health: bool = True) -> None:
        rec.note(command)
        await async_send(self, command, check_health)

    monkeypatch.setattr(sync_connection.AbstractConnection, "send_packed_command", sync_recording)
    monkeypatch.setattr(async_connection.AbstractConnection, "send_packed_command", async_recording)
    return rec


def _fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Consumer tokens and the local clock as the same sequence on each run."""
    counter = iter(range(1_000_000))
    monkeypatch.setattr(secrets, "token_hex", lambda n=8: f"{next(counter):0{2 * n}x}")
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)


def _run(
    connect: Callable[..., AbstractContextManager[Any]],
    server: RedisProcess,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
) -> list[bytes]:
    recorder.sent.clear()
    # the producer id is drawn when the client is made: the same on each run
    monkeypatch.setattr(secrets, "token_urlsafe", lambda n=None: "producer-id0")
    with connect(server.url, namespace="tsame", **SETTINGS) as client:
        _fixed(monkeypatch)  # after connecting: redis-py's own use of `secrets` differs
        scenario(client)
    sent = list(recorder.sent)
    with server.client() as admin:  # the plain port, as the server's administrator
        admin.flushall()
    return _normal(sent)


def test_sync_and_asyncio_clients_send_byte_identical_commands(
    fresh_server: RedisProcess, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    sync_sent = _run(durables.connect, fresh_server, recorder, monkeypatch)
    aio_sent = _run(aio_bridge.connect, fresh_server, recorder, monkeypatch)
    assert len(sync_sent) > 60  # the scenario really ran
    assert any(b"EVALSHA" in one for one in sync_sent)
    assert aio_sent == sync_sent


def test_the_recorder_sees_a_difference(
    fresh_server: RedisProcess, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison can fail: one call more on one side is seen."""
    sync_sent = _run(durables.connect, fresh_server, recorder, monkeypatch)

    def one_more(url: str, **settings: Any) -> aio_bridge.BridgedClient:
        bridged = aio_bridge.connect(url, **settings)
        bridged.client.channel("extra")
        return bridged

    aio_sent = _run(one_more, fresh_server, recorder, monkeypatch)
    assert aio_sent != sync_sent
