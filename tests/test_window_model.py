"""A state machine drives a shared or serial durable through random fetch / ack /
rollback / attach / detach / publish steps and checks it against a plain model:
windows never exceeded, nothing held twice, nothing acked comes back, redelivery
counts as predicted, depth + transaction depth exact at every step."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import ClassVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import durables
from durables.reply_parsers import raw, text

RUNS = itertools.count()


@dataclass
class Model:
    """What a correct durable must look like from the outside."""

    published: list[str] = field(default_factory=list)
    acked: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)  # expected redelivery counts
    held: dict[str, dict[str, durables.Event]] = field(default_factory=dict)  # consumer -> events


class DurableMachine(RuleBasedStateMachine):
    url: ClassVar[str]
    namespace: ClassVar[str]
    kind: ClassVar[str]
    settings: ClassVar[dict[str, float]] = {}
    """The client's settings beside a short block (a kind's machine may add its own)."""

    def __init__(self) -> None:
        super().__init__()
        self.client = durables.connect(
            self.url, namespace=self.namespace, block_s=0.05, **self.settings
        )
        self.channel = self.client.channel(f"m{next(RUNS)}")
        self.durable = self.channel.durable("d", kind=self.kind)  # type: ignore[arg-type]
        self.consumers: dict[str, durables.Consumer] = {}
        self.windows: dict[str, int] = {}
        self.model = Model()
        self.names = itertools.count()

    @rule(n=st.integers(1, 5))
    def publish(self, n: int) -> None:
        ids = self.channel.publish_many(durables.Message(b"x") for _ in range(n))
        self.model.published += ids

    @precondition(lambda self: len(self.consumers) < 4)
    @rule(window=st.integers(1, 4))
    def attach(self, window: int) -> None:
        name = f"c{next(self.names)}"
        self.consumers[name] = self.durable.consumer(name, prefetch=window)
        self.windows[name] = window
        self.model.held[name] = {}

    @precondition(lambda self: self.consumers)
    @rule(data=st.data())
    def detach(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.consumers)))
        self.consumers.pop(name).close()
        for event_id in self.model.held.pop(name):
            self.model.counts[event_id] = self.model.counts.get(event_id, 0) + 1

    @precondition(lambda self: self.consumers)
    @rule(data=st.data())
    def fetch(self, data: st.DataObject) -> None:
        self._fetch(data.draw(st.sampled_from(sorted(self.consumers))))

    def _fetch(self, name: str) -> None:
        for event in self.consumers[name].fetch(timeout=0):
            self.check(name, event)
            self.model.held[name][event.id] = event
        assert len(self.model.held[name]) <= self.windows[name]

    def check(self, name: str, event: durables.Event) -> None:
        """What every delivery must be (a kind's machine may ask more)."""
        assert event.id not in self.model.acked, "an acknowledged event came back"
        for other, held in self.model.held.items():
            assert event.id not in held, f"{event.id} handed to {name} while {other} holds it"
        assert event.redelivery_count == self.model.counts.get(event.id, 0)

    def _pick(self, data: st.DataObject) -> tuple[str, durables.Event]:
        name = data.draw(st.sampled_from(sorted(n for n, h in self.model.held.items() if h)))
        held = self.model.held[name]
        return name, held.pop(data.draw(st.sampled_from(sorted(held))))

    @precondition(lambda self: any(self.model.held.values()))
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        _, event = self._pick(data)
        event.ack()
        self.model.acked.add(event.id)

    @precondition(lambda self: any(self.model.held.values()))
    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        _, event = self._pick(data)
        event.rollback()
        self.model.counts[event.id] = self.model.counts.get(event.id, 0) + 1

    @invariant()
    def depths_are_exact(self) -> None:
        outstanding = len(self.model.published) - len(self.model.acked)
        depth, transaction_depth = self.durable.depth(), self.durable.transaction_depth()
        assert depth + transaction_depth == outstanding
        assert transaction_depth >= sum(len(h) for h in self.model.held.values())

    @invariant()
    def no_consumer_holds_more_than_its_window_on_the_server(self) -> None:
        summary = raw(self.client.redis, "XPENDING", self.channel.keys.stream, "d")
        for entry in summary.get("consumers") or ():
            name = text(entry["name"]).partition("#")[0]
            if name in self.windows:
                assert int(entry["pending"]) <= self.windows[name]

    @invariant()
    def serial_never_lets_two_consumers_hold_events(self) -> None:
        if self.kind == "serial":
            assert sum(1 for held in self.model.held.values() if held) <= 1

    def teardown(self) -> None:
        try:
            for consumer in self.consumers.values():
                consumer.close()
            expected = set(self.model.published) - self.model.acked
            rest: set[str] = set()
            with self.durable.consumer("drain", prefetch=1000) as drain:
                deadline = time.monotonic() + 10  # a lapsing lease gives its events back
                while rest != expected and time.monotonic() < deadline:
                    rest |= {e.id for e in drain.fetch(timeout=0.2)}
                    drain.commit()
            assert rest == expected, "an unacknowledged event was lost"
            self.channel.delete()
        finally:
            self.client.close()


def machine(url: str, namespace: str, kind: str) -> type[RuleBasedStateMachine]:
    attrs = {"url": url, "namespace": namespace, "kind": kind}
    return type(f"{kind.title()}Machine", (DurableMachine,), attrs)


SETTINGS = settings(max_examples=40, stateful_step_count=50, deadline=None)


def test_shared_durable_against_the_model(server_url: str, namespace: str) -> None:
    run_state_machine_as_test(machine(server_url, namespace, "shared"), settings=SETTINGS)


def test_serial_durable_against_the_model(server_url: str, namespace: str) -> None:
    run_state_machine_as_test(machine(server_url, namespace, "serial"), settings=SETTINGS)
