"""Small helpers shared by the behaviour tests: publishing numbered events, their texts,
fetching a number of events within a time limit, fetching in threads, waiting for a condition,
counting the server's commands."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import durables


def publish(channel: durables.Channel, n: int, start: int = 1) -> list[str]:
    """Publish `e<start>` .. `e<start + n - 1>` in one batch; their ids."""
    return channel.publish_many([durables.Message(f"e{i}") for i in range(start, start + n)])


def texts(events: list[durables.Event]) -> list[str]:
    """The events' payloads as text, in order."""
    return [e.text for e in events]


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


def command_calls(redis: Any, name: str) -> int:
    """How many times a standalone server ran a command ('evalsha', 'xinfo|groups', ...),
    scripts' inner calls included."""
    stats: Any = redis.info("commandstats")
    return int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))


def fetching(
    consumers: dict[str, durables.Consumer], timeout: float = 0.3
) -> tuple[list[tuple[str, str, float]], Callable[[], None]]:
    """Each consumer fetching in a thread of its own, blocking: what arrived (name, text,
    when), and a function that stops them."""
    got: list[tuple[str, str, float]] = []
    lock, stop = threading.Lock(), threading.Event()

    def loop(name: str, consumer: durables.Consumer) -> None:
        while not stop.is_set():
            for event in consumer.fetch(timeout=timeout):
                with lock:
                    got.append((name, event.text, time.monotonic()))

    threads = [threading.Thread(target=loop, args=pair) for pair in consumers.items()]
    for thread in threads:
        thread.start()

    def halt() -> None:
        stop.set()
        for thread in threads:
            thread.join(timeout=5)

    return got, halt


@contextmanager
def fetch_loops(
    channel: durables.Channel,
    receivers: Mapping[durables.Kind, Callable[[durables.Event], object]],
    *,
    replicated: int = 0,
    consumers: dict[str, durables.Consumer] | None = None,
) -> Iterator[None]:
    """Per kind, an auto-ack consumer of the durable named after the kind, fetching in a
    thread of its own and handing every event to the kind's receiver, until the block
    ends (`replicated` for each consumer; each is put in `consumers` when given)."""
    stop = threading.Event()
    durables_by_kind = {kind: channel.durable(kind, kind=kind) for kind in receivers}

    def loop(kind: durables.Kind, receive: Callable[[durables.Event], object]) -> None:
        with durables_by_kind[kind].consumer(
            "loop", auto_ack=True, replicated=replicated
        ) as consumer:
            if consumers is not None:
                consumers[kind] = consumer
            while not stop.is_set():
                for event in consumer.fetch(timeout=0.3):
                    receive(event)

    threads = [threading.Thread(target=loop, args=pair, daemon=True) for pair in receivers.items()]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)


class Line:
    """Listeners of a serial durable's subscribers that record what they processed, in
    order, and every moment two of them held events at once (`overlaps`)."""

    def __init__(self, pause: Callable[[], float]) -> None:
        self.pause = pause  # seconds each event takes
        self.lock = threading.Lock()
        self.processed: list[str] = []
        self.holding: set[str] = set()
        self.overlaps: list[set[str]] = []

    def listener(self, name: str) -> Callable[[durables.Event], None]:
        def on_event(event: durables.Event) -> None:
            with self.lock:
                self.holding.add(name)
                if len(self.holding) > 1:
                    self.overlaps.append(set(self.holding))
                self.processed.append(event.text)
            time.sleep(self.pause())
            with self.lock:
                self.holding.discard(name)
            event.ack()

        return on_event
