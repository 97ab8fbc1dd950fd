"""A session's record on the server: the heartbeat and loading never make half a record."""

from __future__ import annotations

import time

import durables
from durables import keys

from .conftest import FAST
from .servers import RedisProcess


def test_the_heartbeat_does_not_bring_back_a_removed_session_record(
    server: RedisProcess, server_url: str, namespace: str
) -> None:
    # Housekeeping removes an expired session's record; a client stopped past the keep-alive
    # takes its live lease again before it finds that out, and its heartbeat then renews.
    record = keys.session(namespace, "phone")
    with durables.connect(server_url, namespace=namespace, **FAST) as client:
        session = client.session("phone", timeout=30)
        with server.client() as raw:
            assert raw.exists(record)
            raw.delete(record)
            time.sleep(1.0)  # about three beats of the heartbeat (lease 1 s)
            assert raw.exists(record) == 0  # no stamp left behind: no half a record
        session.close(keepalive=False)


def test_a_record_without_its_timeout_counts_as_none(
    server: RedisProcess, server_url: str, namespace: str
) -> None:
    # what an earlier version's heartbeat could leave: a stamp alone
    with server.client() as raw:
        raw.hset(keys.session(namespace, "phone"), "last_seen_ms", 1)
    with (
        durables.connect(server_url, namespace=namespace, **FAST) as client,
        client.session("phone", timeout=30) as session,
    ):
        assert not session.resumed
        assert session.interests == {}
