"""The demo behind `durables demo`: producers and an exclusive consumer, told as it happens.

Runs against the embedded server unless given a URL, in its own namespace, and
starts from a clean channel each time so every run prints the same story.
"""

from __future__ import annotations

import sys
import threading

from rich.console import Console

import durables

CHANNEL = "orders"
PRODUCERS = 2


def _produce(channel: durables.Channel, producer: int, count: int) -> None:
    for i in range(count):
        channel.publish(
            {"order": i, "producer": producer},
            key=f"p{producer}-{i}",
            properties={"producer": producer, "region": "eu" if i % 2 else "us"},
        )


def _publish_concurrently(channel: durables.Channel, events: int) -> None:
    per = max(1, events // PRODUCERS)
    threads = [threading.Thread(target=_produce, args=(channel, p, per)) for p in range(PRODUCERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run(url: str | None = None, namespace: str | None = None, events: int = 20) -> int:
    """Run the demo; returns a process exit code."""
    out = Console(highlight=False)
    with durables.connect(url, namespace=namespace or "demo") as client:
        out.print(f"[bold]durables demo[/] on {client.url} ({client.server_version})")
        client.channel(CHANNEL).delete()
        channel = client.channel(CHANNEL)
        billing = channel.durable("billing", kind="exclusive")
        audit = channel.durable("audit", kind="exclusive", filter="region = 'eu'")
        _publish_concurrently(channel, events)
        info = channel.info()
        out.print(f"{PRODUCERS} producers published {info.length} events to '{CHANNEL}'")
        out.print(
            f"durable 'billing' depth {billing.depth()}; 'audit' (region = 'eu') "
            f"depth {audit.depth()}"
        )

        with billing.consumer("worker-1", auto_ack=False) as worker:
            try:
                billing.consumer("worker-2")
            except durables.DurableInUseError as exc:
                out.print(f"a second consumer on the exclusive durable is refused: {exc}")
            batch = worker.fetch(timeout=2)
            out.print(
                f"worker-1 fetched {len(batch)} events in publish order: "
                f"{', '.join(str(e.key) for e in batch[:6])}, ..."
            )
            half = batch[len(batch) // 2 - 1]
            half.ack()
            out.print(
                f"ack of event {half.id} acknowledged it and every event before it: "
                f"{billing.transaction_depth()} left unacknowledged"
            )
        with billing.consumer("worker-1") as worker:
            again = worker.fetch(timeout=2)
            out.print(
                f"after re-subscribing, {len(again)} unacknowledged events came back, "
                f"redelivered={again[0].redelivered}, count={again[0].redelivery_count}"
            )

        seen: list[durables.Event] = []
        done = threading.Event()
        expected = audit.depth()

        def listener(event: durables.Event) -> None:
            seen.append(event)
            if len(seen) == expected:
                done.set()

        with audit.subscribe(listener):
            done.wait(5)
        regions = sorted({str(e.properties["region"]) for e in seen})
        out.print(f"'audit' listener received {len(seen)} events, regions {regions}")

        report = client.housekeep()
        out.print(
            f"housekeeping trimmed {report.total_removed} events acknowledged by every "
            f"durable; {channel.info().length} remain"
        )
        ok = billing.depth() == 0 and billing.transaction_depth() == 0 and regions == ["eu"]
        out.print("[green]demo finished[/]" if ok else "[red]demo saw something unexpected[/]")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run(sys.argv[1] if len(sys.argv) > 1 else None))
