"""Publish a few orders to a channel.

    python examples/producer.py [--url redis://127.0.0.1:6379/0] [--count 10]

With no URL the embedded server is used (started if needed).
"""

from __future__ import annotations

import argparse

import durables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=None)
    parser.add_argument("--channel", default="orders")
    parser.add_argument("--count", type=int, default=10)
    args = parser.parse_args()
    with durables.connect(args.url) as client:
        channel = client.channel(args.channel)
        messages = [
            durables.Message({"order": i}, key=f"order-{i}", properties={"qty": i % 7})
            for i in range(args.count)
        ]
        for event_id in channel.publish_many(messages):
            print(event_id)


if __name__ == "__main__":
    main()
