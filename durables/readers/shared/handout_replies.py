"""The replies of the shared, serial and keyed consumer's scripts and reads, parsed for
its state machine (`handout`): redelivery counts, an attachment, acknowledgements made or
refused, a read through a tap, and what one fetch brought (`Dealt`). Pure, as the state
machine is (layer 2)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...reply_parsers import entries_read

if TYPE_CHECKING:
    from ...events import Event

log = logging.getLogger("durables.readers.shared.handout")
"""The state machine's logger: what a refusal says is the consumer's to say."""


@dataclass(frozen=True)
class Dealt:
    """What one fetch brought: where to wait from, the events, and a notice if any."""

    newest: str
    rung: str
    events: list[Event]
    notice: str | None = None
    waited: bool = False
    """The fetch already blocked for new events (through a tap): fetch again, no wait."""


def counts(flat: Sequence[bytes]) -> dict[str, int]:
    """Redelivery counts as the scripts return them: id, count, ..."""
    return {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}


def settled(reply: Any) -> tuple[int, dict[str, int]]:
    """settle_shared.lua's reply: whether the consumer may wait again, and the redelivery
    counts of its pending events."""
    then, flat = reply
    return int(then), counts(flat)


def attached(reply: Any) -> tuple[int, bool]:
    version, member = reply
    return int(version), bool(member)


def acks_made(context: str, count: int, reply: Any) -> bool:
    """Whether acknowledgements sent on their own were made (ack_shared.lua). Refused (0),
    the consumer had been detached and the events dealt again: they count for their new
    holder, and come back to it flagged as redelivered. Refused as made under an earlier
    attachment (-1, sent while another thread attached again): those still this
    consumer's come back in its pending list and are acknowledged then, as a lost
    acknowledgement is."""
    if reply == 0:
        log.warning(
            "%s: %d acknowledgement(s) refused: this consumer was detached (its "
            "lease lapsed) and the events were dealt again",
            context,
            count,
        )
    elif reply != 1:
        log.info("%s: %d acknowledgement(s) made before attaching again go with a later "
                 "fetch", context, count)  # fmt: skip
    return bool(reply == 1)


def tapped(reply: Any) -> list[Any] | None:
    """New events read through a tap; None if the tap was not open (an error reply)."""
    return None if isinstance(reply, Exception) else entries_read(reply)


__all__ = ["Dealt", "acks_made", "attached", "counts", "settled", "tapped"]
