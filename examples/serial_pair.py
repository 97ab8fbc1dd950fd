"""Two consumers on a serial durable: shared work, yet strictly one step at a time.

    python examples/serial_pair.py [--url URL] [--steps 8]

A serial durable deals to several consumers like a shared one, but nothing new is dealt
while anything dealt is unacknowledged. Here two consumers take turns: while one holds a
step, the other asks and is given nothing; once the step is acknowledged, the other asks
again and the next step is its own. The line passes between them, in publish order.
"""

from __future__ import annotations

import argparse

import durables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=None)
    parser.add_argument("--channel", default="ledger")
    parser.add_argument("--durable", default="postings")
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    done: list[int] = []
    with durables.connect(args.url) as client:
        channel = client.channel(args.channel)
        serial = channel.durable(args.durable, kind="serial")
        # prefetch means explicit acknowledgement: a step is held until it is acked
        with (
            serial.consumer("left", prefetch=1, auto_ack=False) as left,
            serial.consumer("right", prefetch=1, auto_ack=False) as right,
        ):
            channel.publish_many([durables.Message({"step": s}) for s in range(1, args.steps + 1)])
            turns = [("left", left, "right", right), ("right", right, "left", left)]
            for turn in range(args.steps):
                name, holder, other_name, other = turns[turn % 2]
                events = holder.fetch(timeout=5.0)
                if not events:
                    break
                step = events[0].json()["step"]
                meanwhile = other.fetch(timeout=0.2)  # the serial rule: nothing while step waits
                print(f"{name} posted step {step} ({other_name} was given {len(meanwhile)})")
                events[0].ack()
                done.append(step)
    in_order = done == list(range(1, args.steps + 1))
    print(f"{len(done)} steps posted, in publish order: {'yes' if in_order else 'NO'}")


if __name__ == "__main__":
    main()
