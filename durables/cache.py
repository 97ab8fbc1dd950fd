"""A session's local client cache of one keyed channel (GemFire's client region).

Pure data, no I/O. Live events update it; replayed events never do (GemFire's durable clients).
Interest-registration responses follow GemFire's rules, so that application
operations take precedence over them:

- an entry that exists with a valid value is not overwritten;
- an invalid entry is replaced by a valid response value;
- a destroyed entry is not updated, and is removed once the response is applied;
- an empty response leaves the cache as it is (possibly empty).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

State = Literal["valid", "invalid", "destroyed"]


@dataclass
class Entry:
    """One cached key: its value (None unless valid), state and the event that set it."""

    value: bytes | None
    state: State
    event_id: str | None = None


class LocalCache:
    """The client-side copy of a keyed channel's values; reads work while disconnected."""

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()

    def get(self, key: str, default: bytes | None = None) -> bytes | None:
        """The valid value of `key`, else `default`."""
        entry = self._entries.get(key)
        return entry.value if entry is not None and entry.state == "valid" else default

    def entry(self, key: str) -> Entry | None:
        """The entry itself, whatever its state."""
        return self._entries.get(key)

    def __contains__(self, key: object) -> bool:
        entry = self._entries.get(key)  # type: ignore[call-overload]
        return entry is not None and entry.state == "valid"

    def __len__(self) -> int:
        return sum(1 for e in self._entries.values() if e.state == "valid")

    def __iter__(self) -> Iterator[str]:
        return iter([k for k, e in self._entries.items() if e.state == "valid"])

    def items(self) -> dict[str, bytes]:
        """Every valid key and value."""
        with self._lock:
            return {k: e.value for k, e in self._entries.items() if e.value is not None}

    # -- application operations (they take precedence over interest responses) -------

    def put(self, key: str, value: bytes, event_id: str | None = None) -> None:
        with self._lock:
            self._entries[key] = Entry(value, "valid", event_id)

    def invalidate(self, key: str) -> None:
        """Keep the key but drop its value (GemFire's invalidate)."""
        with self._lock:
            self._entries[key] = Entry(None, "invalid")

    def destroy(self, key: str) -> None:
        """Mark the key destroyed: no interest response brings it back."""
        with self._lock:
            self._entries[key] = Entry(None, "destroyed")

    # -- from the server --------------------------------------------------------------

    def apply_response(self, values: Mapping[str, tuple[str, bytes]]) -> None:
        """Apply an interest-registration response (key -> (event id, value)) by the rules."""
        with self._lock:
            for key, (event_id, value) in values.items():
                entry = self._entries.get(key)
                if entry is None or entry.state == "invalid":
                    self._entries[key] = Entry(value, "valid", event_id)
            for key in [k for k, e in self._entries.items() if e.state == "destroyed"]:
                del self._entries[key]

    def apply_live(self, key: str, value: bytes, event_id: str, destroyed: bool) -> None:
        """Apply a live event: a put, or a tombstone that removes the key."""
        with self._lock:
            if destroyed:
                self._entries.pop(key, None)
            else:
                self._entries[key] = Entry(value, "valid", event_id)
