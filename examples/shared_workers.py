"""Share one durable between worker processes: each job goes to one worker, in turn.

    python examples/shared_workers.py [--url URL] [--workers 2] [--jobs 10]

The parent creates a shared durable, starts the workers one after the other (each
attaches a consumer with a window, then says it is ready), publishes the jobs, and
stops the workers once the durable has nothing waiting and nothing unacknowledged.
Each worker prints the jobs it did; the parent then prints who did what. With two
workers and ten jobs, one does 1, 3, 5, 7, 9 and the other 2, 4, 6, 8, 10.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from multiprocessing.synchronize import Event as EventType
from typing import Any

import durables

WINDOW = 10
"""Jobs a worker may hold unacknowledged at once (its window, or prefetch)."""


def work(
    url: str | None,
    channel: str,
    durable: str,
    name: str,
    ready: EventType,
    stop: EventType,
    done: Any,
) -> None:
    """A worker process: attach, do jobs until told to stop, report what it did."""
    jobs: list[int] = []
    with durables.connect(url) as client:
        shared = client.channel(channel).get_durable(durable)
        with shared.consumer(name, prefetch=WINDOW) as consumer:
            ready.set()
            while not stop.is_set():
                for event in consumer.fetch(timeout=0.2):
                    job = event.json()["job"]
                    # one write per line: the workers share the parent's stdout, and
                    # print's separate write of the newline could interleave with theirs
                    print(f"{name} did job {job}\n", end="", flush=True)
                    jobs.append(job)
                consumer.commit()  # a window means explicit acknowledgement
    done.put((name, jobs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=None)
    parser.add_argument("--channel", default="jobs")
    parser.add_argument("--durable", default="workers")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=10)
    args = parser.parse_args()
    spawn = multiprocessing.get_context("spawn")
    stop, done = spawn.Event(), spawn.Queue()
    with durables.connect(args.url) as client:
        channel = client.channel(args.channel)
        shared = channel.durable(args.durable, kind="shared")
        workers = []
        for i in range(1, args.workers + 1):
            ready = spawn.Event()
            worker = spawn.Process(
                target=work,
                args=(args.url, args.channel, args.durable, f"worker-{i}", ready, stop, done),
            )
            worker.start()
            if not ready.wait(60):
                raise SystemExit(f"worker-{i} did not attach")
            workers.append(worker)
        channel.publish_many([durables.Message({"job": n}) for n in range(1, args.jobs + 1)])
        deadline = time.monotonic() + 60
        while shared.depth() or shared.transaction_depth():
            if time.monotonic() > deadline:
                raise SystemExit("the workers did not finish in time")
            time.sleep(0.1)
        stop.set()
        reports = dict(done.get(timeout=60) for _ in workers)
        for worker in workers:
            worker.join(60)
    for name in sorted(reports):
        print(f"{name} took jobs {' '.join(str(j) for j in reports[name])}")


if __name__ == "__main__":
    main()
