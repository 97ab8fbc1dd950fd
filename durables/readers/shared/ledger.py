"""What a shared, serial or keyed consumer handed out and acknowledged (layer 2, no I/O):
each event handed to the application once, whatever reads bring it again (the pending
list read at every fetch, a reply read twice after a failover), and the ids that a plain
acknowledgement must also drop a redelivery count for. Its handout (`handout.SharedHandout`)
decides what to send; this remembers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

from ...events import Event, SeenMessages, event_from_entry

RECENT_ACKS = 10_000
"""How many acknowledged ids a consumer remembers to discard exact duplicates (bounded)."""


class Ledger:
    """Events handed out and not yet acknowledged, and those acknowledged lately."""

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.handed: set[str] = set()  # handed to the application, not yet acked
        self._acked: set[str] = set()  # acknowledged lately (`remember`)
        self._acked_before: set[str] = set()
        self.discarded = 0
        """Exact duplicates not handed out again: events acknowledged here that came back
        (an acknowledgement lost in a failover, redis/redis#5433), or a publish stored
        twice (`SeenMessages`)."""
        self.seen = SeenMessages()
        self.rolled_back: set[str] = set()
        """Events rolled back here and not dealt again since: until the rollback has run,
        they are still in this consumer's pending list, where a read racing it (another
        thread's fetch or wait) must not take them for new ones. Two generations, as the
        acknowledged ids (`_remember`): at least the last RECENT_ACKS are kept."""
        self._rolled_back_before: set[str] = set()
        self.counted: set[str] = set()
        """Events dealt with a redelivery count, until acknowledged: only their counts need
        dropping with a plain acknowledgement (`acks`)."""

    def forget(self, dropped: Iterable[str]) -> None:
        """Joined as a new member: nothing held is this consumer's any more, and the
        `dropped` acknowledgements, if they come back here, are new events."""
        dropped = {*dropped, *self.handed}
        self._acked.difference_update(dropped)
        self._acked_before.difference_update(dropped)
        self.handed.clear()
        self.counted.clear()
        self.rolled_back.clear()
        self._rolled_back_before.clear()

    def hand_out(
        self, entries: Sequence[Any], counts: dict[str, int], to_ack: list[str]
    ) -> list[Event]:
        """Events of entries read, each handed out once; `counts`: the redelivery counts
        the script gave (remembered, so the acknowledgement drops them). Entries not to
        hand out that still need acknowledging (trimmed, exact duplicates) go to `to_ack`."""
        if counts:
            self.counted.update(counts)
        channel, handed = self.channel, self.handed
        acked, acked_before = self._acked, self._acked_before  # acknowledged lately
        built = [event_from_entry(channel, entry, counts) for entry in entries]
        batch = self.seen.remember_all(built)
        if batch is not None:
            ids = [event.id for event in batch]  # none stored twice
        else:
            duplicate = self.seen.duplicate
            ids = [event.id for event in built if event is not None and not duplicate(event)]
        # The usual batch, checked by whole-set operations: nothing trimmed, lately
        # acknowledged or handed out already, no id twice (the size grows by all of them).
        rolled_back, rolled_back_before = self.rolled_back, self._rolled_back_before
        if (
            len(ids) == len(built)
            and handed.isdisjoint(ids)
            and acked.isdisjoint(ids)
            and acked_before.isdisjoint(ids)
            and (not rolled_back or rolled_back.isdisjoint(ids))
            and (not rolled_back_before or rolled_back_before.isdisjoint(ids))
        ):
            before = len(handed)
            handed.update(ids)
            if len(handed) - before == len(ids):
                return cast(list[Event], built)
            handed.difference_update(ids)  # none was there before: as it was
        events: list[Event] = []
        fresh = set(ids)  # not stored twice
        for entry, event in zip(entries, built, strict=True):
            if event is None:  # trimmed while pending: nothing to deliver
                to_ack.append(entry[0].decode())
            elif event.id in acked or event.id in acked_before or event.id not in fresh:
                to_ack.append(event.id)  # the ack was lost, or stored twice
                self.discarded += 1
            elif (
                event.id in rolled_back or event.id in rolled_back_before
            ) and event.id not in counts:
                continue  # read before its rollback ran: it comes again, counted
            elif event.id not in handed:
                rolled_back.discard(event.id)
                rolled_back_before.discard(event.id)
                handed.add(event.id)
                events.append(event)
        return events

    def commit(self, events: Sequence[Event]) -> list[str]:
        """The ids of `events` to acknowledge: those handed out here (an event rolled back,
        acknowledged already, or no longer this consumer's after it was detached is not
        acknowledged again)."""
        handed = self.handed
        ids = [e.id for e in events if e.id in handed]
        handed.difference_update(ids)
        self._remember(ids)
        return ids

    def _remember(self, ids: Sequence[str]) -> None:
        """Keep at least the last RECENT_ACKS acknowledged ids (and at most twice that), to
        discard them if they come back: two generations of sets, the older dropped whole
        when the newer is full, so remembering costs one set update per batch."""
        self._acked.update(ids)
        if len(self._acked) >= RECENT_ACKS:
            self._acked_before, self._acked = self._acked, set()

    def withdraw(self, events: Sequence[Event]) -> None:
        """Events read that will not be handed out after all."""
        self.handed.difference_update(e.id for e in events)

    def roll_back(self, ids: Sequence[str]) -> None:
        """`ids` handed back: no longer held, counted again when dealt again, and not taken
        for new events if a racing read finds them still pending here."""
        self.handed.difference_update(ids)
        self.counted.difference_update(ids)
        self.rolled_back.update(ids)
        if len(self.rolled_back) >= RECENT_ACKS:  # most went to others: the oldest go
            self._rolled_back_before, self.rolled_back = self.rolled_back, set()

    def acks(self, acks: Sequence[str]) -> list[Any]:
        """Acknowledgements for a script that makes them behind its own check
        (ack_shared.lua, ack_tap.lua, join_shared.lua): how many were dealt with a
        redelivery count, then the ids, those first. Only their counts are dropped: an event
        dealt without a count gets one only if it is dealt again (this consumer's lease
        lapsed, or its acknowledgement was lost), and its next holder drops it; a count left
        behind goes at the housekeeping after its event is trimmed (trim.lua). An `HDEL` of
        every id cost the server about 3 % of a serial consumer's work per event."""
        counted = self.counted.intersection(acks) if self.counted else set()
        if not counted:
            return [0, *acks]
        return [len(counted), *counted, *(i for i in acks if i not in counted)]

    def acknowledged(self, acks: Iterable[str]) -> None:
        """`acks` were made: their redelivery counts went with them."""
        if self.counted:
            self.counted.difference_update(acks)


__all__ = ["RECENT_ACKS", "Ledger"]
