"""A durable client session: what queued while it was away is replayed, then it goes live.

    python examples/session_cache.py [--url URL] [--session desk-7]

A trading desk registers a durable interest in two prices and goes away, keeping its
queue. Prices change meanwhile. When it comes back within its timeout, the session
resumes: the events queued while it was away are replayed to its listener marked
`replayed` and are never applied to the local cache (the desk already holds a fresher
price), then `after_region_live` says the channel is live, and live events update the
cache.
"""

from __future__ import annotations

import argparse
import threading

import durables


class Desk:
    """A session listener: prints each event with the cache's value of its key."""

    def __init__(self, cache: durables.LocalCache) -> None:
        self.cache = cache
        self.live = threading.Event()
        self.seen = 0
        self.changed = threading.Condition()

    def on_event(self, event: durables.Event) -> None:
        how = "replayed" if event.replayed else "live"
        cached = self.cache.get(event.key or "")
        print(f"{how} {event.key} {event.text} (cache: {cached.decode() if cached else None})")
        with self.changed:
            self.seen += 1
            self.changed.notify_all()

    def after_region_live(self, channel: str) -> None:
        print(f"{channel} is live")
        self.live.set()

    def wait_for(self, count: int) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: self.seen >= count, timeout=30):
                raise SystemExit(f"only {self.seen} of {count} events came")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=None)
    parser.add_argument("--session", default="desk-7")
    args = parser.parse_args()
    with durables.connect(args.url) as client:
        prices = client.channel("prices", keyed=True)  # keeps the last value of every key

        with client.session(args.session, timeout=60) as session:
            session.register_interest("prices", ["AAPL", "MSFT"], durable=True)
            print(f"opened {session.id} (resumed: {session.resumed})")
        # leaving the `with` is close(keepalive=True): the queue outlives the disconnect

        for key, price in (("AAPL", "101.5"), ("AAPL", "102.0"), ("MSFT", "310.0")):
            prices.publish(price, key=key)
        print("while away: AAPL 101.5, AAPL 102.0, MSFT 310.0")

        with client.session(args.session, timeout=60) as session:
            print(f"back as {session.id} (resumed: {session.resumed})")
            cache = session.cache("prices")
            cache.put("AAPL", b"102.5")  # the desk's own, fresher price
            desk = Desk(cache)
            session.add_listener("prices", desk)
            session.ready_for_events()  # places the marker: replay up to it, then live
            desk.wait_for(3)
            if not desk.live.wait(30):
                raise SystemExit("the channel never went live")
            prices.publish("103.0", key="AAPL")
            desk.wait_for(4)
            values = {key: value.decode() for key, value in sorted(cache.items().items())}
            print(f"cache now: {values}")
            session.close(keepalive=False)  # done with the example: drop the session


if __name__ == "__main__":
    main()
