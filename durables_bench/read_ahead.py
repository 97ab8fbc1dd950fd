"""What reading ahead gives a serial durable's holder, on the plain program and on durables.

A serial durable lets one consumer hold the line; the benchmark's plain program drains with
two readers at once. This probe drains the same channel with plain redis-py commands three
ways: one reader that waits for each reply, one reader that keeps two reads in flight (its
acknowledgements two reads behind), and two readers on threads (the benchmark's plain
program); and with a serial durable's holder (window 100, auto-ack) two ways: reading
ahead (the default from a window of 16: half the window at a time, the next half read
while the application works) and taking its window whole. The server works on the next
read while the client handles the last one only when that read was sent first.

`--work-us W` makes every reader spend W microseconds per event after each batch (a busy
loop: the application's own work), which is where reading ahead pays.

Run it with `python -m durables_bench.read_ahead [--events N] [--rounds R] [--work-us W]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis

import durables
from durables.readers.shared import handout

from .consume import RawConsumer, drain_raw, fill_raw, raw_readers
from .env import RAW_GROUP, RAW_STREAM, at_least_one
from .servers import ValkeyServer

IN_FLIGHT = 2
BATCH = 50
"""Events per read ahead: a window of 100 holds the batch handled and the reads in flight."""
WINDOW = 100
"""The durables holder's window (prefetch)."""


def work(events: int, work_s: float) -> None:
    """The application's own work on a batch: a busy loop of `work_s` per event."""
    if work_s > 0 and events:
        end = time.perf_counter() + work_s * events
        while time.perf_counter() < end:
            pass


def _fill(r: redis.Redis, events: int) -> None:
    r.flushall()
    r.xgroup_create(RAW_STREAM, RAW_GROUP, "0", mkstream=True)
    fill_raw(r, events)


def one_reader(r: redis.Redis, events: int, work_s: float = 0.0) -> float:
    """Events/s of one reader that sends its next read (with the acks) after each reply."""
    reader = RawConsumer(r, "w0")

    def step() -> int:
        got = len(reader.read())
        work(got, work_s)
        return got

    return drain_raw([reader], events).per_s if not work_s else _timed(step, events)


def _timed(step: Callable[[], int], events: int) -> float:
    started, got = time.perf_counter(), 0
    while got < events:
        read = step()
        if not read:
            break
        got += read
    return got / (time.perf_counter() - started)


def holder(url: str, events: int, work_s: float, *, ahead: bool) -> float:
    """Events/s of a serial durable's holder (window 100, auto-ack) that reads ahead or
    takes its window whole (the threshold moved out of reach, for this measurement only)."""
    kept = handout.READ_AHEAD_WINDOW
    handout.READ_AHEAD_WINDOW = kept if ahead else WINDOW + 1
    try:
        with durables.connect(url, namespace=f"probe-{time.monotonic_ns()}") as client:
            channel = client.channel("line")
            durable = channel.durable("line", kind="serial")
            for start in range(0, events, 1000):
                channel.publish_many([durables.Message(b"x" * 100)] * min(1000, events - start))
            with durable.consumer("w0", prefetch=WINDOW, auto_ack=True) as consumer:

                def step() -> int:
                    got = len(consumer.fetch(timeout=1))
                    work(got, work_s)
                    return got

                return _timed(step, events)
    finally:
        handout.READ_AHEAD_WINDOW = kept


def two_readers(url: str, events: int) -> float:
    with raw_readers(lambda: redis.Redis.from_url(url), 2) as readers:
        return drain_raw(readers, events).per_s


def reading_ahead(r: redis.Redis, events: int, work_s: float = 0.0) -> float:
    """Events/s of one reader that keeps `IN_FLIGHT` reads on the wire."""
    conn: Any = r.connection_pool.get_connection()
    try:

        def send(acks: Sequence[bytes]) -> int:
            commands: list[tuple[Any, ...]] = []
            if acks:
                commands.append(("XACK", RAW_STREAM, RAW_GROUP, *acks))
            commands.append(
                ("XREADGROUP", "GROUP", RAW_GROUP, "w0", "COUNT", BATCH, "STREAMS", RAW_STREAM, ">")
            )
            conn.send_packed_command(conn.pack_commands(commands))
            return len(commands)

        def entries(replies: int) -> list[Any]:
            reply = [conn.read_response() for _ in range(replies)][-1]
            if not reply:
                return []
            return next(iter(reply.values())) if isinstance(reply, dict) else reply[0][1]

        started = time.perf_counter()
        in_flight = [send(()) for _ in range(IN_FLIGHT)]
        got, acks = 0, list[bytes]()
        while got < events:
            batch = entries(in_flight.pop(0))
            in_flight.append(send(acks))  # before this batch is handled
            acks = [entry[0] for entry in batch]
            work(len(batch), work_s)
            got += len(batch)
            if not batch:  # the channel was filled first: nothing more will come
                break
        for replies in in_flight:
            acks += [entry[0] for entry in entries(replies)]
        if acks:
            r.xack(RAW_STREAM, RAW_GROUP, *acks)
        return got / (time.perf_counter() - started)
    finally:
        r.connection_pool.release(conn)


def run(events: int, rounds: int, work_s: float = 0.0) -> list[tuple[float, ...]]:
    """Per round, events/s: one plain reader, one reading ahead, two plain readers (with no
    work only: they share the client's one interpreter), the durables holder reading
    ahead, and taking its window whole."""
    results: list[tuple[float, ...]] = []
    with tempfile.TemporaryDirectory() as work_dir, ValkeyServer(Path(work_dir)) as server:
        url = ValkeyServer.url.fget(server)  # type: ignore[attr-defined]
        r = redis.Redis.from_url(url)
        try:
            for _ in range(rounds):
                _fill(r, events)
                one = one_reader(r, events, work_s)
                _fill(r, events)
                ahead = reading_ahead(r, events, work_s)
                _fill(r, events)
                two = two_readers(url, events) if not work_s else float("nan")
                r.flushall()
                held_ahead = holder(url, events, work_s, ahead=True)
                held_whole = holder(url, events, work_s, ahead=False)
                results.append((one, ahead, two, held_ahead, held_whole))
        finally:
            r.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m durables_bench.read_ahead", description=__doc__
    )
    parser.add_argument("--events", type=at_least_one, default=60_000)
    parser.add_argument("--rounds", type=at_least_one, default=3)
    parser.add_argument("--work-us", type=float, default=0.0)
    args = parser.parse_args(argv)
    print(
        "| one reader | one reader, two reads in flight | two readers "
        "| durables serial, reading ahead | durables serial, window whole |\n|---|---|---|---|---|"
    )
    for row in run(args.events, args.rounds, args.work_us * 1e-6):
        print("| " + " | ".join("—" if v != v else f"{v:,.0f}" for v in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
