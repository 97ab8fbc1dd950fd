"""Consume a channel through an exclusive durable, acknowledging as it goes.

    python examples/exclusive_consumer.py [--url URL] [--durable billing] [--count 10]

Run it twice at once: the second is refused while the first holds the durable.
Kill the first with kill -9 and start it again: after the lease lapses, it gets
the events that were not acknowledged, marked as redelivered.

It acknowledges only what it printed: an event fetched beyond `--count` is left for
the next run (which gets it marked as redelivered).
"""

from __future__ import annotations

import argparse

import durables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=None)
    parser.add_argument("--channel", default="orders")
    parser.add_argument("--durable", default="billing")
    parser.add_argument("--count", type=int, default=10, help="stop after this many events")
    parser.add_argument("--idle", type=float, default=5.0, help="stop after this long idle")
    args = parser.parse_args()
    # read_batch: fetch no more than it will print (a fetch may bring up to that many)
    with durables.connect(args.url, read_batch=max(1, min(args.count, 100))) as client:
        durable = client.channel(args.channel).durable(args.durable, kind="exclusive")
        received = 0
        with durable.consumer("example", auto_ack=False) as consumer:
            while received < args.count:
                events = consumer.fetch(timeout=args.idle)
                if not events:
                    break
                for event in events[: args.count - received]:
                    flag = " (redelivered)" if event.redelivered else ""
                    print(f"{event.id} {event.key} {event.json()}{flag}")
                    event.ack()  # this one and those before it; never one not printed
                    received += 1
        print(f"received {received} events; depth now {durable.depth()}")


if __name__ == "__main__":
    main()
