"""Dead letters: events a shared or serial durable gave up on after `max_deliveries`.

The dispatchers (`fetch_shared.lua` and its kin) move such an event, with its fields, the
reason and the delivery count, to the durable's dead-letter stream and
acknowledges it on the durable. From there it can be read and replayed. Flows
(`ops.flows`) both clients drive.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .events import encode_event
from .ops import durables as ops
from .ops.flows import Flow, run
from .publishing import packed, publish_batches
from .records import DeadLetter

if TYPE_CHECKING:
    from .io.context import BaseContext
    from .keys import ChannelKeys


def dead_letters(
    ctx: BaseContext, k: ChannelKeys, durable: str, count: int | None
) -> Flow[list[DeadLetter]]:
    """The durable's dead letters, oldest first."""
    return (yield from run(ops.dead_letters(k, durable, count)))


def replay(ctx: BaseContext, k: ChannelKeys, durable: str, count: int | None = None) -> Flow[int]:
    """Publish dead letters to the channel again (as new events) and drop them here.

    Every durable on the channel sees a replayed event again, as a new event.
    """
    letters = yield from dead_letters(ctx, k, durable, count)
    if not letters:
        return 0
    limit = ctx.settings.max_payload_bytes
    encoded = [
        encode_event(
            d.data, d.key, json.loads(d.raw_properties) if d.raw_properties else None, limit
        )
        for d in letters
    ]
    yield from publish_batches(ctx, k, packed(encoded))
    yield from run(ops.drop_dead_letters(k, durable, [d.id for d in letters]))
    return len(letters)


__all__ = ["DeadLetter", "dead_letters", "replay"]
