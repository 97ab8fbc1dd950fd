"""Session replay: a durable client session comes back after a disconnect
and replays 100,000 events that queued meanwhile.

- durables: `client.session(id)` resumed, `ready_for_events()`, a listener counting
  the replayed events (acknowledged by the session as it goes).
- raw: the same consumer group read by hand, `XREADGROUP COUNT` + `XACK` pipelined.
- peer: a JetStream durable pull consumer that was created before the events, then
  `fetch` + `ack` until all are in.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import durables

from .consume import RawConsumer, fill_channel, fill_raw
from .env import Env
from .peer import DURABLE, STREAM, add_durables, fetch_step, jetstream, prefill
from .results import Rate, Row, Target, at_least
from .scenario import Throughput
from .workers import run_tasks, run_workers


class Counter:
    """A session listener that counts replayed events and says when all are in."""

    def __init__(self, want: int) -> None:
        self.want = want
        self.seen = 0
        self.done = threading.Event()

    def on_event(self, event: durables.Event) -> None:
        self.seen += event.replayed
        if self.seen >= self.want:
            self.done.set()


RAW_FLOOR = 0.8


class SessionReplay(Throughput):
    name = "session_replay"
    title = "session replay after a disconnect"

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        return at_least(f"≥ {RAW_FLOOR}x raw", row.ratio("raw"), RAW_FLOOR)

    def count(self, env: Env) -> int:
        return env.size(100_000, 1_000)

    def durables(self, env: Env) -> Rate:
        with env.durables() as client:
            channel = client.channel("replay")
            with client.session("phone", timeout=600) as away:
                away.register_interest("replay")
            fill_channel(channel, self.count(env))
            counter = Counter(self.count(env))
            meter = env.meter("durables")
            with client.session("phone", timeout=600) as back:
                assert back.resumed
                back.add_listener("replay", counter)
                back.ready_for_events()
                if not counter.done.wait(600):
                    raise RuntimeError(f"replayed {counter.seen} of {counter.want}")
                return meter.rate(counter.seen)

    def raw(self, env: Env) -> Rate:
        with env.redis() as r:
            reader = RawConsumer(r, "phone")
            reader.create_group()
            fill_raw(r, self.count(env))
            meter = env.meter("raw")
            rate = run_workers([reader.step], self.count(env), finish=reader.finish)
            return meter.rate(rate.events, rate.seconds)

    async def peer(self, env: Env, url: str) -> Rate:
        async with jetstream(url) as (nc, js):
            await add_durables(js, [DURABLE], max_ack_pending=1000)
            await prefill(js, self.count(env))
            sub = await js.pull_subscribe_bind(durable=DURABLE, stream=STREAM)
            meter = env.meter("peer")
            rate = await run_tasks([fetch_step(sub, 1000)], self.count(env))
            await nc.flush()
            return meter.rate(rate.events, rate.seconds)
