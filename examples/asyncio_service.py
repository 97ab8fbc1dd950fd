"""A small asyncio service: a producer task and a worker task on a shared durable.

    python examples/asyncio_service.py [--url URL] [--count 20]

The producer publishes orders one by one; the worker takes them from the shared
durable "fulfilment" (start more workers, in this process or others, and the orders
are dealt among them), acknowledges each one and prints what it processed. With no
URL the embedded server is used (started if needed).
"""

from __future__ import annotations

import argparse
import asyncio

import durables
import durables.aio as aio


async def produce(channel: aio.AsyncChannel, count: int) -> None:
    for i in range(count):
        await channel.publish({"order": i, "qty": i % 7}, key=f"order-{i}")
        await asyncio.sleep(0.01)


async def work(durable: aio.AsyncDurable, count: int) -> int:
    processed = 0
    async with durable.consumer("worker", prefetch=8) as consumer:
        async for event in consumer:
            order = event.json()
            print(f"processed {event.key} qty={order['qty']}", flush=True)
            await event.ack()
            processed += 1
            if processed == count:
                break
    return processed


async def main(url: str | None, channel_name: str, count: int) -> None:
    client = await aio.connect(url)
    async with client:
        channel = await client.channel(channel_name)
        durable = await channel.durable("fulfilment", kind="shared")
        worker = asyncio.create_task(work(durable, count))
        await produce(channel, count)
        processed = await asyncio.wait_for(worker, timeout=30)
        print(f"processed {processed} orders; depth now {await durable.depth()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=None)
    parser.add_argument("--channel", default="web-orders")  # its own: it reads them all
    parser.add_argument("--count", type=int, default=20)
    args = parser.parse_args()
    try:
        asyncio.run(main(args.url, args.channel, args.count))
    except durables.DurablesError as exc:
        raise SystemExit(f"error: {exc}") from None
