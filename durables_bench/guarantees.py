"""What the delivery guarantees cost: durables with a guarantee against durables without it.

- Idempotent publishing (every publish carries the producer's id and a sequence, stored
  once however often it is sent) against `idempotent_publish=False`, single and batched.
- A `replicated=1` read (a `WAIT` for a replica in each read's round trip) against a plain
  read, with a replica started for the run.

The row's `raw` column is the durables call without the guarantee (so `ratio_raw` is the
cost: 1.0 is free); there is no peer column.
"""

from __future__ import annotations

import functools
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import durables

from .env import PAYLOAD, PROPERTIES, Env, message
from .results import Rate, Row, Target, Variant, at_least, median
from .scenario import Scenario, attempt
from .servers import ValkeyServer
from .workers import batches

WITHOUT: Variant = "raw"
NOTES = {
    "raw": "the raw column is durables without the guarantee",
    "peer": "no peer: durables with and without the guarantee",
}


class _WithAndWithout(Scenario):
    """Alternating rounds of the two, medians of `env.rounds`."""

    goal = 1.0

    def measure(self, env: Env, guaranteed: bool) -> Rate:
        raise NotImplementedError

    def run(self, env: Env) -> list[Row]:
        found: dict[Variant, list[Rate]] = {"durables": [], WITHOUT: []}
        notes = dict(NOTES)
        for _ in range(env.rounds):
            pairs: tuple[tuple[Variant, bool], ...] = (("durables", True), (WITHOUT, False))
            for variant, guaranteed in pairs:
                outcome = attempt(env, functools.partial(self.measure, env, guaranteed))
                if isinstance(outcome, str):
                    notes[variant] = outcome
                else:
                    found[variant].append(outcome)
        row = Row(self.name, self.title, notes=notes)
        for variant, rates in found.items():
            row.per_s[variant] = median([r.per_s for r in rates]) if rates else None
        return [row]

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        return at_least(f"≥ {self.goal:.2f}x without", row.ratio(WITHOUT), self.goal)


class IdempotenceCost(_WithAndWithout):
    """Publishing with idempotence against without: single events and batches of 1,000."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.name = f"idempotence_{'single' if size == 1 else f'batch_{size}'}"
        self.title = f"idempotent publish ÷ plain, {'1 per call' if size == 1 else size}"
        self.goal = 1 / 1.1 if size == 1 else 1 / 1.05

    def measure(self, env: Env, guaranteed: bool) -> Rate:
        with env.durables(idempotent_publish=guaranteed) as client:
            channel = client.channel("publish")
            channel.durable("d0")
            if self.size == 1:
                n = env.size(10_000, 300)
                channel.publish(PAYLOAD, properties=PROPERTIES)
                meter = env.meter("durables")
                for _ in range(n):
                    channel.publish(PAYLOAD, properties=PROPERTIES)
                return meter.rate(n)
            batch = [message() for _ in range(self.size)]
            channel.publish_many(batch[:1])
            sizes = batches(env.size(100_000, 4 * self.size), self.size)
            meter = env.meter("durables")
            for size in sizes:
                channel.publish_many(batch[:size])
            return meter.rate(sum(sizes))


class _Replica(ValkeyServer):
    """A replica of the run's server, for as long as a measurement needs one."""

    name = "replica"

    def __init__(self, workdir: Path, primary_port: int) -> None:
        super().__init__(workdir)
        self.primary_port = primary_port

    def command(self) -> list[str]:
        command = super().command()
        config = self.workdir / "valkey.conf"
        config.write_text(config.read_text() + f"replicaof 127.0.0.1 {self.primary_port}\n")
        return command


class ReplicatedRead(_WithAndWithout):
    """An exclusive consumer draining 20,000 events with `replicated=1` against without,
    a replica attached in both."""

    name = "replicated_read"
    title = "replicated=1 read ÷ plain, exclusive"

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        return None  # its cost is for information: one WAIT per fetch

    def measure(self, env: Env, guaranteed: bool) -> Rate:
        port = int(env.redis_url.rsplit(":", 1)[1].split("/")[0])
        with env.redis() as primary:
            primary.config_set("repl-diskless-sync-delay", 0)  # not 5 s before a sync
        with (
            tempfile.TemporaryDirectory() as workdir,
            _Replica(Path(workdir), port),
            env.durables() as client,
        ):
            _wait_online(env)
            channel = client.channel("replicated")
            dur = channel.durable("audit")
            n = env.size(20_000, 1_000)
            channel.publish_many([durables.Message(PAYLOAD) for _ in range(n)])
            with dur.consumer(replicated=1 if guaranteed else 0) as consumer:
                meter = env.meter("durables")
                got = 0
                while got < n:
                    got += len(consumer.fetch(timeout=5.0))
                return meter.rate(n)


def _wait_online(env: Env, timeout_s: float = 30.0) -> None:
    """Until the replica has synced and follows the primary (a `WAIT` counts it then)."""
    deadline = time.monotonic() + timeout_s
    with env.redis() as primary:
        while (primary.info("replication").get("slave0") or {}).get("state") != "online":
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not come online")
            time.sleep(0.05)


__all__ = ["IdempotenceCost", "ReplicatedRead"]
