"""Where the time goes: the per-event budget of each path, client and server.

The benchmark says how fast; this says why. Each path runs in this one process against a
fresh embedded server, once through durables and once as the hand-written redis-py
program the benchmark compares it with, and reports per event:

- client CPU microseconds (this process's CPU time: encoding, redis-py, our logic),
- server CPU microseconds (the server's own CPU time, from `INFO cpu`),
- round trips per event (each write of a command or a pipeline to a socket, counted at
  redis-py's connection), and where the server's time went (`INFO commandstats`: the top
  commands by time, Lua's inner calls counted under their own names).

CPU times, not wall time: the figures hold on a busy machine, where throughput does not.
Run it with `python -m durables_bench.budget [--events N] [--json]`.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import redis
from redis.connection import Connection

import durables

from .consume import (
    RawConsumer,
    consumers,
    drain_raw,
    durables_step,
    fill_channel,
    fill_raw,
    raw_readers,
)
from .env import KEYS, RAW_STREAM, at_least_one
from .servers import ValkeyServer
from .session_load import NEAR, SESSIONS
from .workers import Handoff, run_workers

NAMESPACE = "budget"
BATCH = 100
"""Events a consumer reads per round trip, in both variants."""


@dataclass(frozen=True)
class Budget:
    """One path through one variant: microseconds and commands per event."""

    path: str
    variant: str
    events: int
    client_us: float
    server_us: float
    round_trips: float
    top: str
    """The server's three most expensive commands: `name µs/event`."""


@dataclass
class Bench:
    """The server under measurement and a plain client on it."""

    url: str
    raw: redis.Redis

    def reset(self) -> None:
        self.raw.flushall(asynchronous=False)

    def server_cpu_s(self) -> float:
        cpu = self.raw.info("cpu")
        return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


Step = Callable[[], object]
PathMaker = Callable[[Bench, int], Generator[Step, None, None]]
"""Sets up (before its first yield), then yields the measured step."""


def measure(bench: Bench, path: str, variant: str, events: int, make: PathMaker) -> Budget:
    steps = make(bench, events)
    step = next(steps)  # everything before the measured step
    bench.raw.config_resetstat()
    server0, client0 = bench.server_cpu_s(), time.process_time()
    with _counting_sends() as sends:
        step()
    client = time.process_time() - client0
    server = bench.server_cpu_s() - server0
    stats = bench.raw.info("commandstats")
    steps.close()
    ours = {"info", "config|resetstat", "config"}
    rows = {k.removeprefix("cmdstat_"): v for k, v in stats.items()}
    rows = {k: v for k, v in rows.items() if k not in ours}
    top = sorted(rows.items(), key=lambda kv: -kv[1]["usec"])[:3]
    return Budget(
        path,
        variant,
        events,
        client_us=client * 1e6 / events,
        server_us=server * 1e6 / events,
        round_trips=sends[0] / events,
        top=", ".join(f"{k} {v['usec'] / events:.2f}" for k, v in top),
    )


@contextmanager
def _counting_sends() -> Iterator[list[int]]:
    """Count every command or pipeline written to a socket (heartbeats included)."""
    count = [0]
    original: Any = Connection.send_packed_command
    own = "send_packed_command" in vars(Connection)  # else inherited: restored by deleting

    def counted(self: Connection, command: Any, check_health: bool = True) -> None:
        count[0] += 1
        original(self, command, check_health)

    setattr(Connection, "send_packed_command", counted)  # noqa: B010 (counting, in the bench only)
    try:
        yield count
    finally:
        if own:
            setattr(Connection, "send_packed_command", original)  # noqa: B010
        else:  # a copy set on the class would hide what is set on its base later
            delattr(Connection, "send_packed_command")


# -- the paths ----------------------------------------------------------------------------


@contextmanager
def _client(bench: Bench) -> Iterator[durables.Client]:
    with durables.connect(bench.url, namespace=NAMESPACE, housekeep_interval_s=3600) as c:
        yield c


def publish_single(bench: Bench, n: int) -> Generator[Step, None, None]:
    with _client(bench) as client:
        ch = client.channel("orders")
        ch.durable("d")
        yield lambda: [ch.publish(b"x" * 100) for _ in range(n)]


def publish_single_raw(bench: Bench, n: int) -> Generator[Step, None, None]:
    bench.raw.xgroup_create("orders", "d", "$", mkstream=True)
    yield lambda: [bench.raw.xadd("orders", {"d": b"x" * 100}) for _ in range(n)]


def _messages(n: int) -> list[durables.Message]:
    return [durables.Message(b"x" * 100, properties={"n": i, "region": "eu"}) for i in range(n)]


def publish_batch(bench: Bench, n: int) -> Generator[Step, None, None]:
    with _client(bench) as client:
        ch = client.channel("orders")
        ch.durable("d")
        batch = _messages(1000)

        def step() -> None:
            for _ in range(n // 1000):
                ch.publish_many(batch)

        yield step


def publish_batch_raw(bench: Bench, n: int) -> Generator[Step, None, None]:
    bench.raw.xgroup_create("orders", "d", "$", mkstream=True)
    yield _xadd_pipelines(bench, n, 1000)


def _xadd_pipelines(bench: Bench, n: int, size: int) -> Step:
    """The plain program's batch publish: `n` events as pipelines of `size` XADDs, with the
    same payload and properties as `_messages`."""

    def step() -> None:
        for _ in range(n // size):
            pipe = bench.raw.pipeline(transaction=False)
            for i in range(size):
                pipe.xadd("orders", {"d": b"x" * 100, "p": json.dumps({"n": i, "region": "eu"})})
            pipe.execute()

    return step


def _away_sessions(client: durables.Client, near: int) -> durables.Channel:
    """`SESSIONS` away sessions on 'orders', `near` of them at their queue limit of 50
    (overflow 'drop_oldest'), the others with a limit they never reach."""
    ch = client.channel("orders")
    for i in range(SESSIONS):
        s = client.session(
            f"s{i}", timeout=3600, max_depth=50 if i < near else 1_000_000, overflow="drop_oldest"
        )
        s.register_interest("orders")
        s.close(keepalive=True)
    ch.publish_many(_messages(1) * 60)  # the near ones reach their limit
    return ch


def _session_groups(bench: Bench) -> None:
    """The raw program's stand-in for the sessions: as many plain consumer groups."""
    for i in range(SESSIONS):
        bench.raw.xgroup_create("orders", f"~session:s{i}", "$", mkstream=True)


def publish_at_limit(bench: Bench, n: int) -> Generator[Step, None, None]:
    """Batches of 100 on a channel with `SESSIONS` away sessions, `NEAR` of them at their
    queue limit: every call looks at those and drops their oldest."""
    with _client(bench) as client:
        ch = _away_sessions(client, NEAR)
        batch = _messages(100)

        def step() -> None:
            for _ in range(n // 100):
                ch.publish_many(batch)

        yield step


def publish_at_limit_raw(bench: Bench, n: int) -> Generator[Step, None, None]:
    _session_groups(bench)
    yield _xadd_pipelines(bench, n, 100)


def publish_single_at_limit(bench: Bench, n: int) -> Generator[Step, None, None]:
    """One event per call with `SESSIONS` away sessions, one of them at its queue limit:
    every call looks at that one."""
    with _client(bench) as client:
        ch = _away_sessions(client, 1)
        yield lambda: [ch.publish(b"x" * 100) for _ in range(n)]


def publish_single_at_limit_raw(bench: Bench, n: int) -> Generator[Step, None, None]:
    _session_groups(bench)
    yield lambda: [bench.raw.xadd("orders", {"d": b"x" * 100}) for _ in range(n)]


def _consume(kind: durables.Kind) -> PathMaker:
    def path(bench: Bench, n: int) -> Generator[Step, None, None]:
        with _client(bench) as client:
            ch = client.channel("orders")
            dur = ch.durable("d", kind=kind)
            for start in range(0, n, 1000):
                ch.publish_many(durables.Message(b"x" * 100) for _ in range(min(1000, n - start)))
            prefetch = BATCH if kind != "exclusive" else None
            with dur.consumer(prefetch=prefetch, auto_ack=True) as c:

                def step() -> None:
                    got = 0
                    while got < n:
                        got += len(c.fetch(timeout=1.0))
                    c.commit()

                yield step

    return path


def consume_raw(bench: Bench, n: int) -> Generator[Step, None, None]:
    r = bench.raw
    r.xgroup_create("orders", "d", "$", mkstream=True)
    for start in range(0, n, 1000):
        pipe = r.pipeline(transaction=False)
        for _ in range(min(1000, n - start)):
            pipe.xadd("orders", {"d": b"x" * 100})
        pipe.execute()

    def step() -> None:
        got, last = 0, list[Any]()
        while got < n:
            pipe = r.pipeline(transaction=False)
            if last:
                pipe.xack("orders", "d", *last)
            pipe.xreadgroup("d", "c", {"orders": ">"}, count=BATCH)
            reply = pipe.execute()[-1]
            last = [entry_id for _, entries in reply for entry_id, _ in entries]
            got += len(last)
        r.xack("orders", "d", *last)

    yield step


DRAIN_CONSUMERS: dict[durables.Kind, int] = {"shared": 4, "serial": 2, "keyed": 4}
"""Consumers of the drain paths: as many as the benchmark's consume scenarios have."""


def _drain(kind: durables.Kind) -> PathMaker:
    """`durables bench`'s consume scenario itself: its consumers, each on a thread of its
    own, drain a channel filled with its events. Unlike `_consume`'s one consumer, this
    shows which side fills first when they share the client's one interpreter."""

    def path(bench: Bench, n: int) -> Generator[Step, None, None]:
        with _client(bench) as client:
            ch = client.channel("consume")
            dur = ch.durable("work", kind=kind)
            fill_channel(ch, n, keyed=kind == "keyed")
            with consumers(dur, DRAIN_CONSUMERS[kind]) as opened:
                steps = [durables_step(c) for c in opened]
                yield lambda: run_workers(steps, n)

    return path


def _drain_raw(kind: durables.Kind) -> PathMaker:
    def path(bench: Bench, n: int) -> Generator[Step, None, None]:
        with raw_readers(lambda: redis.Redis.from_url(bench.url), DRAIN_CONSUMERS[kind]) as readers:
            readers[0].create_group()
            fill_raw(readers[0].r, n)
            yield lambda: drain_raw(readers, n)

    return path


HANDOFF_CONSUMERS: dict[durables.Kind, int] = {
    "exclusive": 1,
    "shared": 4,
    "serial": 2,
    "keyed": 4,
}
"""Consumers of the hand-off paths: as many as the benchmark's latency scenarios have."""


def _handoff(kind: durables.Kind) -> PathMaker:
    def path(bench: Bench, n: int) -> Generator[Step, None, None]:
        handoff = Handoff(n)
        with _client(bench) as client:
            ch = client.channel("orders")
            dur = ch.durable("d", kind=kind)
            with consumers(dur, HANDOFF_CONSUMERS[kind]) as opened:
                handoff.start([durables_step(c) for c in opened])
                try:
                    turn = itertools.count()

                    def publish() -> object:  # keyed: a key of KEYS in turn
                        key = f"k{next(turn) % KEYS}" if kind == "keyed" else None
                        return ch.publish(b"x" * 100, key=key)

                    handoff.step(publish)()  # warm: scripts loaded, all waiting
                    yield handoff.step(publish)
                finally:
                    handoff.close()  # before the consumers close

    return path


def _handoff_raw(kind: durables.Kind) -> PathMaker:
    def path(bench: Bench, n: int) -> Generator[Step, None, None]:
        handoff = Handoff(n)
        clients = [redis.Redis.from_url(bench.url) for _ in range(HANDOFF_CONSUMERS[kind])]
        try:
            readers = [RawConsumer(c, f"c{i}", block_ms=200) for i, c in enumerate(clients)]
            readers[0].create_group()
            handoff.start([reader.step for reader in readers])
            publish = functools.partial(bench.raw.xadd, RAW_STREAM, {"d": b"x" * 100})
            handoff.step(publish)()
            yield handoff.step(publish)
        finally:
            handoff.close()
            for c in clients:
                c.close()

    return path


class _Count:
    def __init__(self, want: int) -> None:
        self.want, self.seen, self.done = want, 0, False

    def on_event(self, event: durables.Event) -> None:
        self.seen += 1
        self.done = self.seen >= self.want


def session_replay(bench: Bench, n: int) -> Generator[Step, None, None]:
    with _client(bench) as client:
        ch = client.channel("orders")
        with client.session("phone", timeout=300) as s:
            s.register_interest("orders")
        for start in range(0, n, 1000):
            ch.publish_many(durables.Message(b"x" * 100) for _ in range(min(1000, n - start)))
        counter = _Count(n)

        def step() -> None:
            with client.session("phone", timeout=300) as s:
                s.add_listener("orders", counter)
                s.ready_for_events()
                while not counter.done:
                    time.sleep(0.001)

        yield step


PATHS: dict[str, tuple[PathMaker, PathMaker]] = {
    "publish_single": (publish_single, publish_single_raw),
    "publish_batch_1000": (publish_batch, publish_batch_raw),
    "publish_at_limit": (publish_at_limit, publish_at_limit_raw),
    "publish_single_at_limit": (publish_single_at_limit, publish_single_at_limit_raw),
    "consume_exclusive": (_consume("exclusive"), consume_raw),
    "consume_shared": (_consume("shared"), consume_raw),
    "consume_serial": (_consume("serial"), consume_raw),
    "drain_shared": (_drain("shared"), _drain_raw("shared")),
    "drain_serial": (_drain("serial"), _drain_raw("serial")),
    "drain_keyed": (_drain("keyed"), _drain_raw("keyed")),
    "session_replay": (session_replay, consume_raw),
    "handoff_exclusive": (_handoff("exclusive"), _handoff_raw("exclusive")),
    "handoff_shared": (_handoff("shared"), _handoff_raw("shared")),
    "handoff_serial": (_handoff("serial"), _handoff_raw("serial")),
    "handoff_keyed": (_handoff("keyed"), _handoff_raw("keyed")),
}
ONE_AT_A_TIME = (
    "publish_single",
    "publish_single_at_limit",
    "handoff_exclusive",
    "handoff_shared",
    "handoff_serial",
    "handoff_keyed",
)
"""Paths of one event per round trip: they run a tenth of the events."""


def run(events: int, only: list[str] | None = None) -> list[Budget]:
    budgets = []
    with tempfile.TemporaryDirectory() as work, ValkeyServer(Path(work)) as server:
        url = ValkeyServer.url.fget(server)  # type: ignore[attr-defined]
        raw = redis.Redis.from_url(url)
        bench = Bench(url, raw)
        for name, (ours, theirs) in PATHS.items():
            if only and name not in only:
                continue
            n = events if name not in ONE_AT_A_TIME else max(1000, events // 10)
            for variant, make in (("durables", ours), ("raw", theirs)):
                bench.reset()
                budgets.append(measure(bench, name, variant, n, make))
        raw.close()
    return budgets


def table(budgets: list[Budget]) -> str:
    lines = [
        "| path | variant | client µs/event | server µs/event | round trips/event | "
        "server's top commands (µs/event) |",
        "|---|---|---|---|---|---|",
    ]
    for b in budgets:
        lines.append(
            f"| {b.path} | {b.variant} | {b.client_us:.1f} | {b.server_us:.1f} | "
            f"{b.round_trips:.3f} | {b.top} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m durables_bench.budget", description=__doc__)
    parser.add_argument("--events", type=at_least_one, default=50_000)
    parser.add_argument(
        "--only",
        action="append",
        choices=list(PATHS),
        metavar="PATH",
        help=f"one of: {', '.join(PATHS)} (repeatable)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    budgets = run(args.events, args.only)
    out: Any = [asdict(b) for b in budgets] if args.json else None
    print(json.dumps(out, indent=2) if args.json else table(budgets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
