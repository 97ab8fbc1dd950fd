"""Two consumers on a serial durable: shared work, yet strictly one step at a time.

    python examples/serial_pair.py [--url URL] [--steps 8]

A serial durable deals to several consumers like a shared one, but nothing new is dealt
while anything dealt is unacknowledged. So two listeners that each print a step and then
acknowledge it print the steps in publish order, whichever of them gets each step.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable

import durables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=None)
    parser.add_argument("--channel", default="ledger")
    parser.add_argument("--durable", default="postings")
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    done: list[int] = []
    lock = threading.Lock()

    def listener(name: str) -> Callable[[durables.Event], None]:
        def on_event(event: durables.Event) -> None:
            step = event.json()["step"]
            print(f"{name} posted step {step}", flush=True)
            with lock:
                done.append(step)
            event.ack()  # a window means explicit acknowledgement; the next step waits for it

        return on_event

    with durables.connect(args.url) as client:
        channel = client.channel(args.channel)
        serial = channel.durable(args.durable, kind="serial")
        subs = [serial.subscribe(listener(n), window=1, name=n) for n in ("left", "right")]
        channel.publish_many([durables.Message({"step": s}) for s in range(1, args.steps + 1)])
        deadline = time.monotonic() + 60
        while len(done) < args.steps and time.monotonic() < deadline:
            time.sleep(0.05)
        for sub in subs:
            sub.close()
    in_order = done == list(range(1, args.steps + 1))
    print(f"{len(done)} steps posted, in publish order: {'yes' if in_order else 'NO'}")


if __name__ == "__main__":
    main()
