"""End-to-end latency at a fixed 5,000 events/s, per durable kind (scenario 4).

The consumers attach first; then a producer process (`durables_bench.producer`)
publishes at the fixed rate (one event per call while it keeps up; the table's
"per call" column says how often it had to batch), stamping each payload with its
send time. Latency is receipt minus stamp: the publish round trip, the server,
the wake-up and the read. The first 5 % of events (cold connections and
scripts) are left out of the percentiles.

- durables: `consumer(prefetch=..., auto_ack=True)`, `fetch()` per consumer thread (the
  acks ride with the next fetch).
- raw: per consumer thread, a pipeline of `XACK` + `XREADGROUP ... BLOCK`.
- peer: per consumer task, `fetch` (see PEER_FETCH) on a JetStream durable pull consumer,
  `ack()` each.
"""

from __future__ import annotations

import contextlib
import functools
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING

import durables

from .consume import RawConsumer, consumers
from .env import PREFETCH, Env
from .peer import DURABLE, STREAM, add_durables, jetstream
from .producer import LATENCY_CHANNEL, age_ms
from .results import VARIANTS, Latencies, Rate, Row, Target, all_of, at_most
from .scenario import Compared
from .workers import AsyncStep, Step, run_tasks, run_workers

if TYPE_CHECKING:
    from nats.js.client import JetStreamContext

RATE = 5_000
WARMUP = 0.05
PEER_FETCH = (100, 0.002)
"""The peer's fetch: (batch, seconds). nats-py's `fetch(1)` loop cannot keep up with
5,000/s here (about 2,700/s, so its queue and latency grow without bound); a batch
fetch that lingers 2 ms at most is its best."""
P99_CEILING_MS = {"exclusive": 1.0, "shared": 2.0, "serial": 2.0, "keyed": 2.0}
P50_VS_RAW = {"exclusive": 1.3, "shared": 1.5, "serial": 1.3, "keyed": 1.5}
"""The p50 may be at most this many times the plain program's: no extra round trip
between a publish and the blocked reader that receives it. Shared and keyed: exact round
robin (or a key's owner) makes an event wait for the consumer whose turn it is, so their
p50 is held to 1.5 times the plain program's, and shared's to below JetStream's (whose
pull consumers deal in turn too). A keyed durable's events carry `KEYS` keys in turn;
its plain program is the shared one."""
BELOW_PEER = {"shared"}


class Recorder:
    """Latencies of received payloads; notices a producer that died."""

    def __init__(self, producer: subprocess.Popen[bytes], log: IO[bytes]) -> None:
        self.producer = producer
        self.log = log
        self.samples: list[float] = []
        self.first_ns: int | None = None
        self.last_ns = 0
        self.per_call: float | None = None
        self._lock = threading.Lock()

    def record(self, payloads: Iterable[bytes]) -> int:
        now = time.monotonic_ns()
        ages = [age_ms(data, now) for data in payloads]
        if ages:
            with self._lock:
                self.samples.extend(ages)
                self.first_ns = now if self.first_ns is None else self.first_ns
                self.last_ns = now
        elif self.producer.poll():
            self.log.seek(0)
            tail = self.log.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"the producer exited with {self.producer.returncode}:\n{tail}")
        return len(ages)

    def producer_report(self, stdout: bytes) -> None:
        """Events per publish call, from the producer's closing line."""
        with contextlib.suppress(ValueError, KeyError, IndexError, ZeroDivisionError):
            stats = json.loads(stdout.decode().strip().splitlines()[-1])
            self.per_call = stats["sent"] / stats["calls"]

    def result(self, server: Rate | None = None) -> Latencies:
        kept = self.samples[int(len(self.samples) * WARMUP) :]
        seconds = (self.last_ns - (self.first_ns or self.last_ns)) / 1e9
        return Latencies(kept, seconds, self.per_call, server)


@contextmanager
def producing(variant: str, url: str, count: int) -> Iterator[Recorder]:
    """Start the producer process; wait for it (killing it if it hangs) on the way out."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as log:
        command = [sys.executable, "-m", "durables_bench.producer", variant, url]
        process = subprocess.Popen(
            [*command, str(RATE), str(count)], stdin=subprocess.DEVNULL, stdout=out, stderr=log
        )
        recorder = Recorder(process, log)
        try:
            yield recorder
        finally:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            out.seek(0)
            recorder.producer_report(out.read())


class Latency(Compared[Latencies]):
    """p50 / p99 / p99.9 of `consumers` consumers on a durable of `kind`."""

    def __init__(self, kind: durables.Kind, consumers: int, *, suffix: str = "") -> None:
        self.kind: durables.Kind = kind
        self.consumers = consumers
        self.name = f"latency_{kind}{suffix}"
        plural = "s" if consumers > 1 else ""
        self.title = f"latency at {RATE:,}/s, {kind} ({consumers} consumer{plural})"

    def count(self, env: Env) -> int:
        return env.size(RATE * 6, 1_000)

    def durables(self, env: Env) -> Latencies:
        with env.durables() as client:
            durable = client.channel(LATENCY_CHANNEL).durable("work", kind=self.kind)
            with consumers(durable, self.consumers) as opened:
                meter = env.meter("durables")
                variant = "durables-keyed" if self.kind == "keyed" else "durables"
                with producing(variant, env.redis_url, self.count(env)) as recorder:
                    run_workers([_durables_step(c, recorder) for c in opened], self.count(env))
                return recorder.result(meter.rate(len(recorder.samples)))

    def raw(self, env: Env) -> Latencies:
        clients = [env.redis() for _ in range(self.consumers)]
        try:
            readers = [RawConsumer(r, f"w{i}", block_ms=200) for i, r in enumerate(clients)]
            readers[0].create_group()
            meter = env.meter("raw")
            with producing("raw", env.redis_url, self.count(env)) as recorder:
                steps: list[Step] = [functools.partial(_raw_step, r, recorder) for r in readers]
                run_workers(steps, self.count(env))
            return recorder.result(meter.rate(len(recorder.samples)))
        finally:
            for r in clients:
                r.close()

    async def peer(self, env: Env, url: str) -> Latencies:
        async with jetstream(url) as (_, js):
            cap = PREFETCH if self.kind == "serial" else 1000 * self.consumers
            await add_durables(js, [DURABLE], max_ack_pending=cap)
            subs = [
                await js.pull_subscribe_bind(durable=DURABLE, stream=STREAM)
                for _ in range(self.consumers)
            ]
            meter = env.meter("peer")
            with producing("peer", url, self.count(env)) as recorder:
                steps: list[AsyncStep] = [_peer_step(s, recorder) for s in subs]
                await run_tasks(steps, self.count(env))
            return recorder.result(meter.rate(len(recorder.samples)))

    def run(self, env: Env) -> list[Row]:
        found, notes = self.outcomes(env, rounds=1)
        row = Row(self.name, self.title, table="latency", notes=notes)
        row.per_s = {v: found[v][0].per_s if found[v] else None for v in VARIANTS}
        for variant in VARIANTS:
            got = found[variant][0] if found[variant] else None
            figures = [got.percentile(p) if got else None for p in (50, 99, 99.9)]
            if variant == "durables":
                row.p50_ms, row.p99_ms, row.p99_9_ms = figures
            else:
                for label, value in zip(("p50", "p99", "p99_9"), figures, strict=True):
                    row.extra[f"{variant}_{label}_ms"] = value
            row.extra[f"{variant}_events_per_call"] = got.per_call if got else None
            server = got.server if got else None
            row.extra[f"{variant}_server_us"] = server.server_us if server else None
            row.extra[f"{variant}_server_busy"] = got.server_busy if got else None
        return [row]

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        ceiling = P99_CEILING_MS[self.kind]
        times = P50_VS_RAW[self.kind]
        raw_p50 = row.extra.get("raw_p50_ms")
        p50_vs_raw = row.p50_ms / raw_p50 if row.p50_ms and raw_p50 else None
        checks = [at_most("p50", p50_vs_raw, times), at_most("p99", row.p99_ms, ceiling)]
        goal = f"p50 ≤ {times:g}x raw, p99 ≤ {ceiling:g} ms"
        if self.kind in BELOW_PEER:
            peer_p50 = row.extra.get("peer_p50_ms")
            p50_vs_peer = row.p50_ms / peer_p50 if row.p50_ms and peer_p50 else None
            checks.insert(1, at_most("p50 ÷ nats", p50_vs_peer, 1.0))
            goal = f"p50 ≤ {times:g}x raw and < nats, p99 ≤ {ceiling:g} ms"
        return all_of(goal, checks)


def _durables_step(consumer: durables.Consumer, recorder: Recorder) -> Step:
    def step() -> int:
        return recorder.record(e.data for e in consumer.fetch(timeout=0.2))

    return step


def _raw_step(reader: RawConsumer, recorder: Recorder) -> int:
    return recorder.record(fields[b"d"] for _, fields in reader.read())


def _peer_step(sub: JetStreamContext.PullSubscription, recorder: Recorder) -> AsyncStep:
    async def step() -> int:
        try:
            msgs = await sub.fetch(PEER_FETCH[0], timeout=PEER_FETCH[1])
        except TimeoutError:
            return recorder.record(())
        got = recorder.record(m.data for m in msgs)
        for msg in msgs:
            await msg.ack()
        return got

    return step
