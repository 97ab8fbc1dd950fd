"""A client made with `connect()` and no URL rides through its embedded server's restart."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import durables
from durables.server.embedded import EmbeddedServer

from .conftest import FAST
from .test_embedded_server import kill9_and_wait

EVENTS = 40


@pytest.mark.slow
def test_a_subscription_and_a_publisher_with_no_url_ride_through_a_stop_start_and_a_crash(
    home: Path, monkeypatch: pytest.MonkeyPatch, namespace: str
) -> None:
    monkeypatch.setenv("DURABLES_HOME", str(home))
    seen: list[int] = []
    published: list[int] = []
    failures: list[BaseException] = []
    with durables.connect(None, namespace=namespace, fsync="always", **FAST) as client:
        channel = client.channel("orders")
        sub = channel.durable("audit", start="earliest").subscribe(
            lambda event: seen.append(int(event.text))
        )
        server = EmbeddedServer(home)
        restarts_done = threading.Event()

        def publish() -> None:
            try:
                for i in range(EVENTS):
                    channel.publish(str(i).encode())
                    published.append(i)
                    if i == EVENTS // 2:
                        restarts_done.wait(60)
            except BaseException as exc:  # reported by the test below
                failures.append(exc)

        publisher = threading.Thread(target=publish)
        publisher.start()
        _wait(lambda: len(published) > EVENTS // 4)
        server.stop()
        server.start()
        _wait(lambda: len(seen) > EVENTS // 3)
        kill9_and_wait(server)
        server.ensure_running()
        restarts_done.set()
        publisher.join(90)
        _wait(lambda: len(seen) >= EVENTS, timeout_s=60)
        assert failures == []
        assert sorted(set(seen)) == list(range(EVENTS))
        assert sub.error is None
        assert client.state == "connected"
        sub.close()


def _wait(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
