"""What a scenario is, and the shape most of them share.

A scenario is one entry in `registry.SCENARIOS`: a name, a title, and `run(env)`
giving one or more report rows. Most are `Compared` scenarios, which only
implement their three variants (`durables`, `raw`, `peer`) and get rounds, n/a
for what the library cannot do yet, and the peer's absence handled for them;
`Throughput` turns their `Rate`s into a row.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from .env import Env
from .results import VARIANTS, Rate, Row, Target, Unsupported, Variant, median

log = logging.getLogger("durables_bench")
T = TypeVar("T")
Outcome = TypeVar("Outcome")


class Scenario(ABC):
    """One entry of the benchmark."""

    name: str
    """Used by --only and as the name of its row."""
    title: str
    """What a person reads in the table."""

    @property
    def row_names(self) -> list[str]:
        """The rows `run` returns (--only matches these too)."""
        return [self.name]

    @abstractmethod
    def run(self, env: Env) -> list[Row]:
        """Measure every variant and return the report rows."""

    def target(self, row: Row, rows: Mapping[str, Row]) -> Target | None:
        """The issue's goal for `row`, if it has one. `rows` holds the rows measured
        before; a target may add figures derived from them to `row.extra`."""
        return None


def attempt(env: Env, call: Callable[[], T]) -> T | str:
    """Run one variant on an emptied server; a note instead of a result when it cannot run."""
    env.reset()
    try:
        return call()
    except Unsupported as exc:
        return f"n/a (not supported yet: {exc})"
    except Exception as exc:  # one failing variant is reported; the run goes on
        log.exception("variant failed")
        return f"failed: {type(exc).__name__}: {exc}"


class Compared(Scenario, Generic[Outcome]):
    """A scenario measured three ways: durables, raw redis-py, and the peer.

    Rounds alternate the variants (durables, raw, peer, durables, ...), so drift in
    the machine's speed touches all three alike.
    """

    @abstractmethod
    def durables(self, env: Env) -> Outcome:
        """The durables library doing the scenario (raise `Unsupported` if it cannot yet)."""

    @abstractmethod
    def raw(self, env: Env) -> Outcome:
        """redis-py (+ hiredis) doing the same Redis commands by hand."""

    @abstractmethod
    async def peer(self, env: Env, url: str) -> Outcome:
        """nats-py against JetStream on the nats-server at `url`."""

    def measure(self, env: Env, variant: Variant) -> Outcome:
        if variant == "durables":
            return self.durables(env)
        if variant == "raw":
            return self.raw(env)
        assert env.nats_url is not None
        return asyncio.run(self.peer(env, env.nats_url))

    def outcomes(
        self, env: Env, rounds: int
    ) -> tuple[dict[Variant, list[Outcome]], dict[str, str]]:
        """Every variant's outcomes over `rounds` rounds, and notes on those without any."""
        found: dict[Variant, list[Outcome]] = {v: [] for v in VARIANTS}
        notes: dict[str, str] = {} if env.nats_url else {"peer": env.peer_note}
        for _ in range(rounds):
            for variant in VARIANTS:
                if variant in notes:
                    continue
                outcome = attempt(env, functools.partial(self.measure, env, variant))
                if isinstance(outcome, str):
                    notes[variant] = outcome
                else:
                    found[variant].append(outcome)
        return found, notes


class Throughput(Compared[Rate]):
    """Events per second of each variant, and the server's CPU time per event: the medians
    of `env.rounds` rounds; and one round of the durables variant on `memory://`."""

    def run(self, env: Env) -> list[Row]:
        found, notes = self.outcomes(env, env.rounds)
        with env.on_memory() as local:
            outcome = attempt(local, functools.partial(self.durables, local))
        if isinstance(outcome, str):
            notes["memory"] = outcome
        else:
            found["memory"] = [outcome]
        return [self.row(found, notes)]

    def row(self, found: dict[Variant, list[Rate]], notes: dict[str, str]) -> Row:
        row = Row(self.name, self.title, notes=notes)
        for variant, rates in found.items():
            row.per_s[variant] = median([r.per_s for r in rates]) if rates else None
            server = [r.server_us for r in rates if r.server_us is not None]
            row.extra[f"{variant}_server_us"] = median(server) if server else None
        return row
