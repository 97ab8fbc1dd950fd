"""Consume + ack on a serial durable, against the plain program that keeps order too.

A serial durable hands events out in publish order, one consumer holding the line; the
plain program of `consume_serial` reads with two readers in no order, which no serial
durable can match by its definition. The fair anchor is one plain reader in order with
two reads in flight (`read_ahead.reading_ahead`): what a holder reading ahead inside its
window could do at best. The durables variant is `consume_serial`'s.
"""

from __future__ import annotations

from collections.abc import Mapping

from .consume import Consume, fill_raw
from .env import RAW_GROUP, RAW_STREAM, Env
from .read_ahead import reading_ahead
from .results import Rate, Row, Target, Unsupported, at_least
from .scenario import Throughput

FLOOR = 0.9


class ConsumeInOrder(Throughput):
    """A serial durable's consume + ack against one plain reader in order, reading ahead."""

    def __init__(self, consumers: int) -> None:
        self.serial = Consume("serial", consumers)
        self.name = "consume_serial_in_order"
        self.title = (
            f"consume + ack, serial ({consumers}) ÷ one plain reader in order, two reads in flight"
        )

    def count(self, env: Env) -> int:
        return self.serial.count(env)

    def durables(self, env: Env) -> Rate:
        return self.serial.durables(env)

    def raw(self, env: Env) -> Rate:
        with env.redis() as r:
            r.xgroup_create(RAW_STREAM, RAW_GROUP, "0", mkstream=True)
            fill_raw(r, self.count(env))
            meter = env.meter("raw")
            per_s = reading_ahead(r, self.count(env))
            return meter.rate(self.count(env), self.count(env) / per_s)

    async def peer(self, env: Env, url: str) -> Rate:
        raise Unsupported("JetStream's nearest is consume_serial's peer row")

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        return at_least(f"≥ {FLOOR}x one plain reader in order", row.ratio("raw"), FLOOR)
