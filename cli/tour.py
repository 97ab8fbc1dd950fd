"""The guided tour behind `durables demo`: producers and an exclusive consumer, told as it
happens. A program on the library's public API, shipped with the command line that runs it
(the library never imports it).

Runs against the embedded server unless given a URL, in its own namespace, and
starts from a clean channel each time so every run prints the same story.
"""

from __future__ import annotations

import threading

from rich.console import Console

import durables
from durables.urls import shown

CHANNEL = "orders"
JOBS = "jobs"
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


def _exclusive(out: Console, billing: durables.Durable) -> None:
    """One consumer at a time, in order, cumulative ack, redelivery after re-subscribing."""
    with billing.consumer("worker-1", auto_ack=False) as worker:
        try:
            billing.consumer("worker-2")
        except durables.DurableInUseError as exc:
            out.print(f"a second consumer on the exclusive durable is refused: {exc}")
        batch = worker.fetch(timeout=2)
        keys = ", ".join(str(e.key) for e in batch[:6])
        out.print(f"worker-1 fetched {len(batch)} events in publish order: {keys}, ...")
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


def _filtered(out: Console, audit: durables.Durable) -> list[str]:
    """A listener on a durable whose filter keeps only region 'eu'; returns the regions seen."""
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
    return regions


def _shared(out: Console, client: durables.Client) -> bool:
    """Two consumers on a shared durable: ten events dealt round robin (as Universal
    Messaging's shared durables deal them)."""
    client.channel(JOBS).delete()
    channel = client.channel(JOBS)
    pool = channel.durable("pool", kind="shared")
    with pool.consumer("a", prefetch=10) as a, pool.consumer("b", prefetch=10) as b:
        channel.publish_many(durables.Message(f"job {i}") for i in range(1, 11))
        got_a, got_b = a.fetch(timeout=2), b.fetch(timeout=2)
        for name, got in (("a", got_a), ("b", got_b)):
            out.print(f"shared consumer {name} got {', '.join(e.text for e in got)}")
        a.commit()
        b.commit()
    return [e.text for e in got_a] == [f"job {i}" for i in range(1, 11, 2)]


def run(url: str | None = None, namespace: str | None = None, events: int = 20) -> int:
    """Run the demo; returns a process exit code."""
    out = Console(highlight=False)
    with durables.connect(url, namespace=namespace or "demo") as client:
        out.print(f"[bold]durables demo[/] on {shown(client.url)} ({client.server_version})")
        client.channel(CHANNEL).delete()
        channel = client.channel(CHANNEL)
        billing = channel.durable("billing", kind="exclusive")
        audit = channel.durable("audit", kind="exclusive", filter="region = 'eu'")
        _publish_concurrently(channel, events)
        out.print(f"{PRODUCERS} producers published {channel.info().length} events to '{CHANNEL}'")
        out.print(
            f"durable 'billing' depth {billing.depth()}; 'audit' (region = 'eu') "
            f"depth {audit.depth()}"
        )
        _exclusive(out, billing)
        regions = _filtered(out, audit)
        round_robin = _shared(out, client)
        report = client.housekeep()
        out.print(
            f"housekeeping trimmed {report.total_removed} events acknowledged by every "
            f"durable; {channel.info().length} remain"
        )
        ok = billing.depth() == 0 and billing.transaction_depth() == 0 and regions == ["eu"]
        ok = ok and round_robin
        out.print("[green]demo finished[/]" if ok else "[red]demo saw something unexpected[/]")
        if client.settings.url is None:
            out.print(
                f"the embedded server keeps running in the background (data under "
                f"{client.settings.home_dir}), for the next program to use; "
                "`durables server stop` stops it"
            )
        return 0 if ok else 1
