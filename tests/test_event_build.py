"""Building events from stream entries on the consumers' hot path (no server): the fast
build of a plain event sets every field as `Event.__init__` does, and a batch checked for
publishes stored twice at once remembers its message ids for the batches after it."""

from __future__ import annotations

import dataclasses

import pytest

from durables.events import Event, event_from_entry
from durables.readers.shared.ledger import Ledger


def _entry(n: int, mid: str, props: bytes | None = None) -> list[object]:
    fields: list[bytes] = [b"d", f"e{n}".encode(), b"m", mid.encode()]
    if props is not None:
        fields += [b"p", props]
    return [f"1700000000000-{n}".encode(), fields]


@pytest.mark.parametrize("props", [None, b'{"a":1}'])
def test_a_plain_event_is_built_with_every_field_as_init_builds_it(props: bytes | None) -> None:
    built = event_from_entry("orders", _entry(7, "p:7", props), {"1700000000000-7": 2})
    assert built is not None
    made = Event("1700000000000-7", "orders", b"e7", None, props, 2, raw_message_id=b"p:7")
    for f in dataclasses.fields(Event):
        assert getattr(built, f.name) == getattr(made, f.name), f.name
    assert built.redelivered and built.text == "e7" and built.message_id == "p:7"
    assert built.properties == ({"a": 1} if props else {})


def test_a_batch_remembers_its_message_ids_so_a_later_copy_is_discarded() -> None:
    ledger = Ledger("orders")
    first = ledger.hand_out([_entry(n, f"p:{n}") for n in (1, 2, 3)], {}, [])
    assert [e.text for e in first] == ["e1", "e2", "e3"]
    to_ack: list[str] = []
    later = ledger.hand_out([_entry(4, "p:2"), _entry(5, "p:5")], {}, to_ack)  # 4: e2 again
    assert [e.text for e in later] == ["e5"]
    assert to_ack == ["1700000000000-4"] and ledger.discarded == 1


def test_a_copy_in_the_same_batch_is_discarded() -> None:
    ledger = Ledger("orders")
    to_ack: list[str] = []
    got = ledger.hand_out([_entry(1, "p:1"), _entry(2, "p:1"), _entry(3, "p:3")], {}, to_ack)
    assert [e.text for e in got] == ["e1", "e3"]
    assert to_ack == ["1700000000000-2"] and ledger.discarded == 1
