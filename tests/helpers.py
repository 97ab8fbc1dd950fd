"""Small helpers shared by the behaviour tests: publishing numbered events, fetching a
number of events within a time limit, waiting for a condition."""

from __future__ import annotations

import time
from collections.abc import Callable

import durables


def publish(channel: durables.Channel, n: int, start: int = 1) -> list[str]:
    """Publish `e<start>` .. `e<start + n - 1>` in one batch; their ids."""
    return channel.publish_many([durables.Message(f"e{i}") for i in range(start, start + n)])


def fetch_all(consumer: durables.Consumer, want: int, timeout: float = 5.0) -> list[durables.Event]:
    """Fetch until `want` events came or `timeout` seconds passed."""
    got: list[durables.Event] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got += consumer.fetch(timeout=0.2)
    return got


def wait_for(predicate: Callable[[], object], timeout: float = 20.0) -> bool:
    """Poll `predicate` until it is true (True) or `timeout` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False
