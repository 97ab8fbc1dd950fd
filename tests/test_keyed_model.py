"""The window model's state machine (tests/test_window_model.py) drives a keyed durable,
with events of a few keys and a kill step, and checks every delivery against a reference
model besides: the event delivered for a key is the key's oldest unacknowledged one
(publish order, rolled-back and crashed holders' events first) and no two events of a key
are out at once; and, as for shared, nothing is held twice, windows hold, redelivery
counts are as predicted, and at the end every unacknowledged event is still there."""

from __future__ import annotations

import itertools
import secrets
from dataclasses import dataclass, field
from typing import ClassVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule, run_state_machine_as_test

import durables
from durables.reply_parsers import raw

from .test_window_model import DurableMachine, Model

KEYS = st.sampled_from(["a", "b", "c", "d", None])


@dataclass
class KeyedModel(Model):
    """The window model, and each event's key."""

    key_of: dict[str, str | None] = field(default_factory=dict)

    def oldest_unacked(self, key: str) -> str:
        return next(i for i in self.published if self.key_of[i] == key and i not in self.acked)


class KeyedMachine(DurableMachine):
    kind: ClassVar[str] = "keyed"
    settings: ClassVar[dict[str, float]] = {"lease_timeout_s": 2.0}

    def __init__(self) -> None:
        # Consumer ids (and so which consumer owns which key) the same in every run:
        # hypothesis replays steps and needs the same outcome (a random token would move
        # keys between the consumers of two runs).
        tokens = itertools.count()
        self.patched = pytest.MonkeyPatch()
        self.patched.setattr(secrets, "token_hex", lambda n=8: f"{next(tokens):0{2 * n}x}")
        super().__init__()
        self.model: KeyedModel = KeyedModel()
        self.killed: list[durables.Consumer] = []

    @rule(keys=st.lists(KEYS, min_size=1, max_size=5))
    def publish(self, keys: list[str | None]) -> None:
        ids = self.channel.publish_many(durables.Message(b"x", key=k) for k in keys)
        self.model.published += ids
        self.model.key_of.update(zip(ids, keys, strict=True))

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
        raw(self.client.redis, "ZADD", self.channel.keys.alive("d"), "XX", 0, member)
        self.killed.append(consumer)
        for event_id in self.model.held.pop(name):
            self.model.counts[event_id] = self.model.counts.get(event_id, 0) + 1

    def check(self, name: str, event: durables.Event) -> None:
        super().check(name, event)
        model = self.model
        key = model.key_of[event.id]
        assert event.key == key
        if key is not None:
            out = [i for held in model.held.values() for i in held if model.key_of[i] == key]
            assert out == [], f"key {key}: {event.id} dealt while {out} is out"
            assert event.id == model.oldest_unacked(key), f"key {key} out of order"

    def teardown(self) -> None:
        try:
            for consumer in self.killed:
                consumer.close()  # it finds itself detached: nothing to give back
            super().teardown()
        finally:
            self.patched.undo()


SETTINGS = settings(max_examples=30, stateful_step_count=40, deadline=None)


def test_keyed_durable_against_the_model(server_url: str, namespace: str) -> None:
    attrs = {"url": server_url, "namespace": namespace}
    run_state_machine_as_test(type("Keyed", (KeyedMachine,), attrs), settings=SETTINGS)
