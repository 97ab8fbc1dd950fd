"""This client as an idempotent producer: a producer id and a sequence per publish in flight.

As Kafka's idempotent producer and Pulsar's producer sequence ids do it: every publish
carries (producer, sequence), the library's own retry after a lost reply sends the same
pair, and `publish.lua` stores it once. The server keeps one small record per producer
and channel, so the pairs must reach it in order: a publish takes a *lane* (a producer id
of its own, `<client>.<n>`) for its whole flow, retries included, so a lane carries one
publish at a time, and threads or tasks publishing at once each hold a lane of their own.
Pure: no I/O.
"""

from __future__ import annotations

import secrets
import threading

PRODUCER_ID_BYTES = 9
"""72 random bits per client: two clients alive within a dedupe window never share one."""
TRIPS_NAMED_FOR = 64
"""Publishes to a channel that name its session trip points' keys after the server asked
for them, before one tries without again: where sessions have queue limits, one call in 65
is sent twice (its first copy refused before it did anything)."""


class Lane:
    """One producer id and its next sequence number; held by one publish at a time."""

    __slots__ = ("id", "sequence")

    def __init__(self, producer_id: str) -> None:
        self.id = producer_id
        self.sequence = 1

    def claim(self, events: int) -> int:
        """The sequence of the first of `events` events; the lane moves past them all."""
        first = self.sequence
        self.sequence += events
        return first


class Producer:
    """The lanes of one client: taken by a publish for its flow, given back after it."""

    def __init__(self) -> None:
        self.id = secrets.token_urlsafe(PRODUCER_ID_BYTES)
        self._free: list[Lane] = []
        self._made = 0
        self._lock = threading.Lock()
        self._trips: dict[str, int] = {}

    def names_trips(self, channel: str) -> bool:
        """Whether a publish to `channel` names the keys of its session trip points: only
        for a while after the server asked for them (`asked_for_trips`). Saves the server
        three keys of every other publish; the server checks the guess (`publish.lua`)."""
        left = self._trips.get(channel)
        if left is None:
            return False
        if left <= 1:
            self._trips.pop(channel, None)
        else:
            self._trips[channel] = left - 1
        return True

    def asked_for_trips(self, channel: str) -> None:
        self._trips[channel] = TRIPS_NAMED_FOR

    def take(self) -> Lane:
        with self._lock:
            if self._free:
                return self._free.pop()
            lane = Lane(f"{self.id}.{self._made}")
            self._made += 1
            return lane

    def give(self, lane: Lane) -> None:
        with self._lock:
            self._free.append(lane)


def message_id(lane_id: str, sequence: int) -> str:
    """The message id `publish.lua` stores with the event of a lane's sequence number."""
    return f"{lane_id}:{sequence}"


__all__ = ["Lane", "Producer", "message_id"]
