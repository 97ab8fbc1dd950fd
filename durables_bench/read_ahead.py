"""What reading ahead would give a serial durable's holder, measured on the plain program.

A serial durable lets one consumer hold the line; the benchmark's plain program drains with
two readers at once. This probe drains the same channel three ways with plain redis-py
commands: one reader that waits for each reply (a holder today), one reader that keeps
two reads in flight (its acknowledgements two reads behind, as a holder reading ahead
inside its window would), and two readers on threads (the benchmark's plain program).
The server works on the next read while the client parses the last one only when that
read was sent before the reply was read.

Run it with `python -m durables_bench.read_ahead [--events N] [--rounds R]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis

from .consume import RawConsumer, drain_raw, fill_raw, raw_readers
from .env import RAW_GROUP, RAW_STREAM, at_least_one
from .servers import ValkeyServer

IN_FLIGHT = 2
BATCH = 50
"""Events per read ahead: a window of 100 holds the batch handled and the reads in flight."""


def _fill(r: redis.Redis, events: int) -> None:
    r.flushall()
    r.xgroup_create(RAW_STREAM, RAW_GROUP, "0", mkstream=True)
    fill_raw(r, events)


def one_reader(r: redis.Redis, events: int) -> float:
    """Events/s of one reader that sends its next read (with the acks) after each reply."""
    return drain_raw([RawConsumer(r, "w0")], events).per_s


def two_readers(url: str, events: int) -> float:
    with raw_readers(lambda: redis.Redis.from_url(url), 2) as readers:
        return drain_raw(readers, events).per_s


def reading_ahead(r: redis.Redis, events: int) -> float:
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


def run(events: int, rounds: int) -> list[tuple[float, float, float]]:
    """Per round: one reader, one reader reading ahead, two readers (events/s)."""
    results = []
    with tempfile.TemporaryDirectory() as work, ValkeyServer(Path(work)) as server:
        url = ValkeyServer.url.fget(server)  # type: ignore[attr-defined]
        r = redis.Redis.from_url(url)
        try:
            for _ in range(rounds):
                _fill(r, events)
                one = one_reader(r, events)
                _fill(r, events)
                ahead = reading_ahead(r, events)
                _fill(r, events)
                results.append((one, ahead, two_readers(url, events)))
        finally:
            r.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m durables_bench.read_ahead", description=__doc__
    )
    parser.add_argument("--events", type=at_least_one, default=60_000)
    parser.add_argument("--rounds", type=at_least_one, default=3)
    args = parser.parse_args(argv)
    print("| one reader | one reader, two reads in flight | two readers |\n|---|---|---|")
    for one, ahead, two in run(args.events, args.rounds):
        print(f"| {one:,.0f} | {ahead:,.0f} | {two:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
