"""Dead letters: events a shared or serial durable gave up on after `max_deliveries`.

The dispatcher (`fetch_shared.lua`) moves such an event, with its fields, the
reason and the delivery count, to the durable's dead-letter stream and
acknowledges it on the durable. From there it can be read and replayed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .events import Message
from .replies import server_errors, text

if TYPE_CHECKING:
    from .durable import Durable


@dataclass(frozen=True)
class DeadLetter:
    """An event a durable stopped redelivering, and why."""

    id: str
    origin_id: str
    data: bytes
    key: str | None
    raw_properties: bytes | None
    reason: str
    deliveries: int

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")


def _dead_letter(entry_id: Any, fields: Any) -> DeadLetter:
    key = fields.get(b"k")
    return DeadLetter(
        id=text(entry_id),
        origin_id=text(fields.get(b"origin", b"")),
        data=fields.get(b"d", b""),
        key=text(key) if key is not None else None,
        raw_properties=fields.get(b"p"),
        reason=text(fields.get(b"reason", b"")),
        deliveries=int(fields.get(b"deliveries", b"0")),
    )


def dead_letters(durable: Durable, count: int | None = None) -> list[DeadLetter]:
    """The durable's dead letters, oldest first."""
    with server_errors(f"dead letters of {durable.name!r}"):
        entries = durable.client.redis.xrange(durable.channel.keys.dead(durable.name), count=count)
    return [_dead_letter(entry_id, fields or {}) for entry_id, fields in entries or []]


def replay(durable: Durable, count: int | None = None) -> int:
    """Publish dead letters to the channel again (as new events) and drop them here.

    Every durable on the channel sees a replayed event again, as a new event.
    """
    letters = dead_letters(durable, count)
    if not letters:
        return 0
    durable.channel.publish_many(
        Message(
            d.data,
            d.key,
            json.loads(d.raw_properties) if d.raw_properties else None,
        )
        for d in letters
    )
    with server_errors(f"dead letters of {durable.name!r}"):
        durable.client.redis.xdel(durable.channel.keys.dead(durable.name), *(d.id for d in letters))
    return len(letters)
