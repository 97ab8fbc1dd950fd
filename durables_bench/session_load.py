"""Durable client sessions under load: the publish cost with 1,000 sessions interested in
the channel, and the time from a dropped connection to the first event after it.

- `sessions_*`: publishing in batches of 100 with no session, with 1,000 sessions (queue
  limits set) away, with the same 1,000 connected (open, their leases renewed by the
  heartbeat meanwhile), and with 1,000 of which 10 sit at their limit
  (overflow='drop_oldest', so every batch checks those 10). The queue-limit check runs
  inside `publish.lua`; the goal is that sessions far from their limit cost nothing.
  raw: the same XADD pipelines with as many plain consumer groups (no limits to keep).
- `reconnect_first_event`: a shared subscription's connections are broken (as a reset
  does); a producer publishes at once; the time until the listener has the event covers
  noticing, reconnecting (backoff, script reload), attaching again and the read. Raw and
  the peer have no reconnection of their own to compare with: n/a.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

import durables
from durables import Channel, Message

from .env import RAW_STREAM, Env, message, xadd_batches
from .fanout import BATCH, COST_CEILING, Fanout, FanoutTo
from .results import VARIANTS, Latencies, Rate, Row, Target, Unsupported, at_most
from .scenario import Compared
from .workers import batches

SESSIONS = 1000
NEAR = 10
RECONNECTS = 20
RECONNECT_CEILING_MS = 500.0


class PublishWithSessions(FanoutTo):
    """Publishing with `n` sessions interested in the channel, `near` of them at their limit."""

    def __init__(self, n: int, near: int = 0, *, connected: bool = False) -> None:
        super().__init__(max(n, 1))
        self.n, self.near, self.connected = n, near, connected
        self.name = (
            f"sessions_{n}"
            + (f"_{near}_at_limit" if near else "")
            + ("_connected" if connected else "")
        )
        self.title = (
            f"publish (batches of {BATCH}), {n} sessions"
            + (f", {near} at their limit" if near else "")
            + (" connected (their leases renewed meanwhile)" if connected else "")
        )

    def durables(self, env: Env) -> Rate:
        batch = [message() for _ in range(BATCH)]
        with env.durables(lease_timeout_s=1.0) as client:
            channel = client.channel("sessions")
            live = []
            for i in range(env.size(self.n, min(self.n, 20))):  # a few with --quick
                small = i < self.near
                s = client.session(
                    f"s{i}",
                    timeout=3600,
                    max_depth=50 if small else 1_000_000,
                    overflow="drop_oldest",
                )
                s.register_interest("sessions")
                if self.connected:
                    live.append(s)
                else:
                    s.close(keepalive=True)
            try:
                return self._publish(env, channel, batch)
            finally:
                for s in live:
                    s.close(keepalive=False)

    def _publish(self, env: Env, channel: Channel, batch: list[Message]) -> Rate:
        channel.publish_many(batch[:1])
        if self.near:
            channel.publish_many(batch[:1] * 60)  # the near ones reach their limit
        sizes = batches(self.count(env), BATCH)
        meter = env.meter("durables")
        for size in sizes:
            channel.publish_many(batch[:size])
        return meter.rate(sum(sizes))

    def raw(self, env: Env) -> Rate:
        with env.redis() as r:
            for i in range(env.size(self.n, min(self.n, 20))):
                r.xgroup_create(RAW_STREAM, f"~session:s{i}", "$", mkstream=True)
            sizes = batches(self.count(env), BATCH)
            meter = env.meter("raw")
            return meter.rate(xadd_batches(r, sizes))

    async def peer(self, env: Env, url: str) -> Rate:
        raise Unsupported("JetStream has no durable client sessions to compare with")


class SessionFanout(Fanout):
    """The publish cost by sessions on the channel; one row per case."""

    name = "sessions"
    title = "publish cost with 1,000 sessions on the channel"

    def __init__(self) -> None:
        self.parts = [PublishWithSessions(0), PublishWithSessions(SESSIONS),
                      PublishWithSessions(SESSIONS, connected=True),
                      PublishWithSessions(SESSIONS, NEAR)]  # fmt: skip

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        if row.name != self.parts[1].name:
            return None
        cost = row.extra["cost_vs_1"]
        goal = f"cost ≤ {COST_CEILING}x with none"
        return at_most(goal, None if cost is None else float(cost), COST_CEILING)


class ReconnectFirstEvent(Compared[Latencies]):
    name = "reconnect_first_event"
    title = "dropped connection to first event, shared subscription"

    def durables(self, env: Env) -> Latencies:
        arrived = threading.Event()
        got: list[str] = []

        def listener(event: durables.Event) -> None:
            got.append(event.id)
            arrived.set()

        samples: list[float] = []
        with env.durables() as client, env.durables() as producer:
            channel = producer.channel("reconnect")
            sub = client.channel("reconnect").durable("w", kind="shared").subscribe(listener)
            channel.publish("warm-up")
            arrived.wait(10)
            started = time.monotonic()
            for _ in range(env.size(RECONNECTS, 3)):
                arrived.clear()
                time.sleep(0.05)
                client.ctx.executor.interrupt()
                t0 = time.perf_counter()
                channel.publish("first")
                if not arrived.wait(30):
                    raise RuntimeError("no event after the reconnection")
                samples.append((time.perf_counter() - t0) * 1000)
            sub.close()
            return Latencies(samples, time.monotonic() - started)

    def raw(self, env: Env) -> Latencies:
        raise Unsupported("a plain redis-py program does not re-attach consumers by itself")

    async def peer(self, env: Env, url: str) -> Latencies:
        raise Unsupported("not measured against JetStream")

    def run(self, env: Env) -> list[Row]:
        found, notes = self.outcomes(env, rounds=1)
        row = Row(self.name, self.title, table="latency", notes=notes)
        got = found["durables"][0] if found["durables"] else None
        if got is not None:
            row.p50_ms, row.p99_ms, row.p99_9_ms = (got.percentile(p) for p in (50, 99, 99.9))
        for variant in VARIANTS:
            row.extra[f"{variant}_events_per_call"] = None
            if variant != "durables":
                for label in ("p50", "p99", "p99_9"):
                    row.extra[f"{variant}_{label}_ms"] = None
        return [row]

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        return at_most(f"p50 ≤ {RECONNECT_CEILING_MS:g} ms", row.p50_ms, RECONNECT_CEILING_MS)
