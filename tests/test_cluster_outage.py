"""A whole cluster away for a moment (its one node restarted): a call made meanwhile
waits the outage out and succeeds, on both clients, instead of surfacing redis-py's
"Redis Cluster cannot be connected" from its attempt to read the slot map again."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import durables

from .conftest import FAST, Connect
from .ha_cluster import Cluster
from .servers import server_binary

pytestmark = [pytest.mark.cluster, pytest.mark.both_clients]
AWAY_S = 1.5


@pytest.fixture
def one_node(tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(server_binary("valkey"), tmp_path / "cluster", primaries=1) as servers:
        yield servers


def test_a_publish_during_a_whole_cluster_outage_waits_and_succeeds(
    connect: Connect, one_node: Cluster, namespace: str
) -> None:
    settings = {**FAST, "reconnect_timeout_s": 30.0}
    with connect(one_node.url, namespace=namespace, **settings) as client:
        channel = client.channel("orders")
        before = channel.publish(b"before")
        node = one_node.nodes[0]
        node.kill9()
        outcome: dict[str, object] = {}

        def publish() -> None:
            try:
                outcome["id"] = channel.publish(b"during")
            except BaseException as exc:  # recorded for the assertion below
                outcome["error"] = exc

        publisher = threading.Thread(target=publish)
        publisher.start()
        time.sleep(AWAY_S)
        node.restart()
        publisher.join(30)
        assert not publisher.is_alive(), "the publish never returned"
        assert "error" not in outcome, f"the outage surfaced: {outcome['error']!r}"
        assert client.state == "connected"
        texts = [e.text for e in channel.durable("audit").consumer().fetch(timeout=2)]
        assert texts == ["before", "during"], (before, outcome)
        assert isinstance(outcome["id"], str) and durables.ids.key(
            outcome["id"]
        ) > durables.ids.key(before)
