"""A state machine drives a keyed durable through random publish / fetch / ack /
rollback / join / leave / kill steps and checks every delivery against a reference
model: the event delivered for a key is the key's oldest unacknowledged one (publish
order, rolled-back and crashed holders' events first), no two events of a key are out at
once, nothing is held twice, windows hold, redelivery counts are as predicted, and at the
end every unacknowledged event is still there."""

from __future__ import annotations

import itertools
import secrets
import time
from dataclasses import dataclass, field
from typing import ClassVar

import pytest
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
KEYS = st.sampled_from(["a", "b", "c", "d", None])


@dataclass
class Model:
    """What a correct keyed durable must look like from the outside."""

    published: list[str] = field(default_factory=list)
    key_of: dict[str, str | None] = field(default_factory=dict)
    acked: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)  # expected redelivery counts
    held: dict[str, dict[str, durables.Event]] = field(default_factory=dict)  # consumer -> events

    def oldest_unacked(self, key: str) -> str:
        return next(i for i in self.published if self.key_of[i] == key and i not in self.acked)

    def again(self, event_ids: object) -> None:
        for event_id in event_ids:  # type: ignore[attr-defined]
            self.counts[event_id] = self.counts.get(event_id, 0) + 1


class KeyedMachine(RuleBasedStateMachine):
    url: ClassVar[str]
    namespace: ClassVar[str]

    def __init__(self) -> None:
        super().__init__()
        # Consumer ids (and so which consumer owns which key) the same in every run:
        # hypothesis replays steps and needs the same outcome (a random token would move
        # keys between the consumers of two runs).
        tokens = itertools.count()
        self.patched = pytest.MonkeyPatch()
        self.patched.setattr(secrets, "token_hex", lambda n=8: f"{next(tokens):0{2 * n}x}")
        self.client = durables.connect(
            self.url, namespace=self.namespace, block_s=0.05, lease_timeout_s=2.0
        )
        self.channel = self.client.channel(f"k{next(RUNS)}")
        self.durable = self.channel.durable("d", kind="keyed")
        self.consumers: dict[str, durables.Consumer] = {}
        self.killed: list[durables.Consumer] = []
        self.windows: dict[str, int] = {}
        self.model = Model()
        self.names = itertools.count()

    @rule(keys=st.lists(KEYS, min_size=1, max_size=5))
    def publish(self, keys: list[str | None]) -> None:
        ids = self.channel.publish_many(durables.Message(b"x", key=k) for k in keys)
        self.model.published += ids
        self.model.key_of.update(zip(ids, keys, strict=True))

    @precondition(lambda self: len(self.consumers) < 4)
    @rule(window=st.integers(1, 4))
    def join(self, window: int) -> None:
        name = f"c{next(self.names)}"
        self.consumers[name] = self.durable.consumer(name, prefetch=window, auto_ack=False)
        self.windows[name] = window
        self.model.held[name] = {}

    @precondition(lambda self: self.consumers)
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.consumers)))
        self.consumers.pop(name).close()
        self.model.again(self.model.held.pop(name))

    @precondition(lambda self: self.consumers)
    @rule(data=st.data())
    def kill(self, data: st.DataObject) -> None:
        """As a kill -9 looks to the server: the consumer's lease stops being renewed and
        lapses (made to lapse now). Its acks are sent first (a fetch), so what it
        acknowledged is known; what it holds comes back with one delivery more."""
        name = data.draw(st.sampled_from(sorted(self.consumers)))
        self._fetch(name)
        consumer = self.consumers.pop(name)
        member = consumer.reader.id  # type: ignore[attr-defined]
        self.client.ctx.runtime.heartbeat.remove(member)
        alive = self.channel.keys.alive("d")
        raw(self.client.redis, "ZADD", alive, "XX", 0, member)
        self.killed.append(consumer)
        self.model.again(self.model.held.pop(name))

    @precondition(lambda self: self.consumers)
    @rule(data=st.data())
    def fetch(self, data: st.DataObject) -> None:
        self._fetch(data.draw(st.sampled_from(sorted(self.consumers))))

    def _fetch(self, name: str) -> None:
        model = self.model
        for event in self.consumers[name].fetch(timeout=0):
            assert event.id not in model.acked, "an acknowledged event came back"
            for other, held in model.held.items():
                assert event.id not in held, f"{event.id} handed to {name} while {other} holds it"
            assert event.redelivery_count == model.counts.get(event.id, 0)
            key = model.key_of[event.id]
            assert event.key == key
            if key is not None:
                out = [i for held in model.held.values() for i in held if model.key_of[i] == key]
                assert out == [], f"key {key}: {event.id} dealt while {out} is out"
                assert event.id == model.oldest_unacked(key), f"key {key} out of order"
            model.held[name][event.id] = event
        assert len(model.held[name]) <= self.windows[name]

    def _pick(self, data: st.DataObject) -> durables.Event:
        name = data.draw(st.sampled_from(sorted(n for n, h in self.model.held.items() if h)))
        held = self.model.held[name]
        return held.pop(data.draw(st.sampled_from(sorted(held))))

    @precondition(lambda self: any(self.model.held.values()))
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        event = self._pick(data)
        event.ack()
        self.model.acked.add(event.id)

    @precondition(lambda self: any(self.model.held.values()))
    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        event = self._pick(data)
        event.rollback()
        self.model.again([event.id])

    @invariant()
    def no_consumer_holds_more_than_its_window_on_the_server(self) -> None:
        summary = raw(self.client.redis, "XPENDING", self.channel.keys.stream, "d")
        for entry in summary.get("consumers") or ():
            name = text(entry["name"]).partition("#")[0]
            if name in self.consumers:
                assert int(entry["pending"]) <= self.windows[name]

    def teardown(self) -> None:
        try:
            for consumer in [*self.consumers.values(), *self.killed]:
                consumer.close()  # a killed one finds itself detached: nothing to give back
            self.killed = []
            expected = set(self.model.published) - self.model.acked
            got: set[str] = set()
            with self.durable.consumer("drain", prefetch=1000) as drain:
                deadline = time.monotonic() + 10
                while got != expected and time.monotonic() < deadline:
                    for event in drain.fetch(timeout=0.2):
                        got.add(event.id)
                        event.ack()
            assert got == expected, "an unacknowledged event was lost (or one came twice)"
            self.channel.delete()
        finally:
            for consumer in self.killed:
                consumer.close()
            self.client.close()
            self.patched.undo()


SETTINGS = settings(max_examples=30, stateful_step_count=40, deadline=None)


def test_keyed_durable_against_the_model(server_url: str, namespace: str) -> None:
    attrs = {"url": server_url, "namespace": namespace}
    run_state_machine_as_test(type("Keyed", (KeyedMachine,), attrs), settings=SETTINGS)
