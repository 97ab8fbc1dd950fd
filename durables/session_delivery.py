"""Delivering a session's events: replay up to the marker, then live (seed 000).

One background thread reads every interested channel through the session's
consumer group. Events up to a channel's marker were queued while the session
was away: they go to the listeners with `replayed=True` and never touch the
cache. Then each listener's `after_region_live(channel)` is called once, and
later events are applied to the cache and passed on.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from . import ids
from .errors import DurablesError
from .events import Event, event_from_entry
from .keys import session_group
from .replies import raw, server_errors, streams_read

if TYPE_CHECKING:
    from .cache import LocalCache
    from .client import Client
    from .session_store import Interest

log = logging.getLogger(__name__)
CONSUMER = "c"


class SessionListener(Protocol):
    """What a session calls: every event, and once per channel when it goes live."""

    def on_event(self, event: Event) -> None: ...


def interest_matches(interest: Interest, key: str | None) -> bool:
    """Whether an event with `key` is of interest (keyless events go to ALL_KEYS only)."""
    if interest.keys is None and interest.regex is None:
        return True
    if key is None:
        return False
    if interest.keys is not None and key in interest.keys:
        return True
    return interest.regex is not None and re.fullmatch(interest.regex, key) is not None


class Delivery:
    """The thread that feeds one live session's listeners and caches."""

    def __init__(
        self,
        client: Client,
        session_id: str,
        interests: dict[str, Interest],
        markers: dict[str, str],
        listeners: Callable[[str], Sequence[SessionListener]],
        cache: Callable[[str], LocalCache],
    ) -> None:
        self.client = client
        self.group = session_group(session_id)
        self.interests = interests
        self.markers = {c: ids.key(m) for c, m in markers.items()}
        self.listeners = listeners
        self.cache = cache
        self.live: set[str] = set()
        self.error: BaseException | None = None
        self._cursors = dict.fromkeys(interests, "0")  # own pending first, then '>'
        self._channel_of = {client.keys(c).stream.encode(): c for c in interests}
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"durables-{session_id}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._round()
        except DurablesError as exc:
            self.error = exc
            log.error("session delivery stopped: %s", exc)

    def _round(self) -> None:
        history = {c: cur for c, cur in self._cursors.items() if cur != ">"}
        reading = history or self._cursors
        streams = [self.client.keys(c).stream for c in reading]
        block = [] if history else ["BLOCK", max(1, int(self.client.settings.block_s * 1000))]
        with server_errors("session delivery"):
            reply = raw(
                self.client.redis, "XREADGROUP", "GROUP", self.group, CONSUMER,
                "COUNT", self.client.settings.read_batch, *block,
                "STREAMS", *streams, *reading.values(),
            )  # fmt: skip
        got = self._by_channel(reply)
        for channel in reading:
            entries = got.get(channel, [])
            if channel in history:
                self._cursors[channel] = entries[-1][0].decode() if entries else ">"
            elif not entries:
                self._go_live(channel)  # caught up: nothing queued is left to replay
            self._deliver(channel, entries)

    def _by_channel(self, reply: Any) -> dict[str, list[Any]]:
        return {self._channel_of[stream]: entries for stream, entries in streams_read(reply)}

    def _deliver(self, channel: str, entries: list[Any]) -> None:
        done = []
        for entry in entries:
            done.append(entry[0])
            event = event_from_entry(channel, entry)
            if event is None or not interest_matches(self.interests[channel], event.key):
                continue
            event.replayed = ids.key(event.id) <= self.markers[channel]
            if not event.replayed:
                self._go_live(channel)
                if event.key is not None:
                    self.cache(channel).apply_live(event.key, event.data, event.id, event.destroyed)
            self._call(channel, event)
        if done:
            with server_errors("session delivery"):
                self.client.redis.xack(self.client.keys(channel).stream, self.group, *done)

    def _call(self, channel: str, event: Event) -> None:
        for listener in self.listeners(channel):
            try:
                listener.on_event(event)
            except Exception:
                log.exception("session listener failed on event %s of %r", event.id, channel)

    def _go_live(self, channel: str) -> None:
        if channel in self.live:
            return
        self.live.add(channel)
        for listener in self.listeners(channel):
            after = getattr(listener, "after_region_live", None)
            if after is None:
                continue
            try:
                after(channel)
            except Exception:
                log.exception("after_region_live failed for %r", channel)
