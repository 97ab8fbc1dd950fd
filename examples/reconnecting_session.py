"""A session that rides through a dropped connection: it resumes by itself, losing nothing.

    python examples/reconnecting_session.py [--url URL] [--session mobile-42] [--count 100]

It prints every event it receives and every change of state, and stops after `--count`
events (or `--idle` seconds without one). Break its connection while it runs (stop a
proxy between it and the server, or pull the network for a while): it says
`session: connected -> disconnected`, keeps retrying for `reconnect_timeout_s`, resumes
the same session within its keep-alive, and receives everything published meanwhile,
once and in order.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable

import durables


class Printer:
    """Prints each event; counts them, and duplicates."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.duplicates = 0
        self.lock = threading.Lock()
        self.last = time.monotonic()

    def on_event(self, event: durables.Event) -> None:
        with self.lock:
            self.duplicates += event.id in self.seen
            self.seen.add(event.id)
            self.last = time.monotonic()
        print(f"event {event.id} {event.text}", flush=True)


def say(what: str) -> Callable[[str, str], None]:
    def on_state(old: str, new: str) -> None:
        print(f"{what}: {old} -> {new}", flush=True)

    return on_state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=None)
    parser.add_argument("--channel", default="orders")
    parser.add_argument("--session", default="mobile-42")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--idle", type=float, default=30.0, help="stop after this long idle")
    args = parser.parse_args()
    with durables.connect(args.url, reconnect_timeout_s=60) as client:
        client.on_state(say("server"))
        client.channel(args.channel)
        printer = Printer()
        session = client.session(args.session, timeout=60)  # the keep-alive
        session.on_state(say("session"))
        session.register_interest(args.channel)
        session.add_listener(args.channel, printer)
        session.ready_for_events()
        print("ready", flush=True)
        while len(printer.seen) < args.count and time.monotonic() - printer.last < args.idle:
            time.sleep(0.05)
        print(f"received {len(printer.seen)} events, {printer.duplicates} duplicates", flush=True)
        session.close(keepalive=False)


if __name__ == "__main__":
    main()
