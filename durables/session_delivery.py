"""Delivering a session's events: replay up to the marker, then live (seed 000).

One background thread reads every interested channel through the session's
consumer group. Events up to a channel's marker were queued while the session
was away: they go to the listeners with `replayed=True` and never touch the
cache. Then each listener's `after_region_live(channel)` is called once, and
later events are applied to the cache and passed on. What to read and what a
reply means is `ops.sessions.SessionCursors`; this thread sends and calls.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from .errors import ConnectionLostError, DurablesError
from .ops.sessions import SessionCursors

if TYPE_CHECKING:
    from .cache import LocalCache
    from .context import Context
    from .events import Event
    from .ops.sessions import Batch
    from .records import Interest

log = logging.getLogger(__name__)


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
        ctx: Context,
        session_id: str,
        interests: dict[str, Interest],
        markers: dict[str, str],
        listeners: Callable[[str], Sequence[SessionListener]],
        cache: Callable[[str], LocalCache],
        outage: Callable[[], None] = lambda: None,
        resume: Callable[[], None] = lambda: None,
        batch: int | None = None,
    ) -> None:
        self.ctx = ctx
        self.cursors = SessionCursors(
            ctx.namespace, session_id, interests, markers, interest_matches,
            batch=batch or ctx.settings.read_batch,
        )  # fmt: skip
        self._outage, self._resume = outage, resume
        self.listeners = listeners
        self.cache = cache
        self.live: set[str] = set()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"durables-{session_id}", daemon=True
        )
        ctx.runtime.own(self)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        self.ctx.runtime.disown(self)

    close = stop

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self._round()
                except ConnectionLostError:
                    self._ride_out()
        except DurablesError as exc:
            self.error = exc
            log.error("session delivery stopped: %s", exc)

    def _ride_out(self) -> None:
        """Wait for the server (a slice at a time, so `stop()` stays prompt), let the session
        resume, then read the in-flight events again."""
        self._outage()
        executor = self.ctx.executor
        while not self._stop.is_set():
            if executor.recover(until=self.ctx.clock() + self.ctx.settings.block_s):
                try:
                    self._resume()
                except ConnectionLostError:
                    continue  # gone again
                self.cursors.restart()
                return

    def _round(self) -> None:
        block_ms = int(self.ctx.settings.block_s * 1000)
        reply = self.ctx.executor.run(self.cursors.read(block_ms), retry=False)
        for batch in self.cursors.on_read(reply):
            self._deliver(batch)

    def _deliver(self, batch: Batch) -> None:
        channel = batch.channel
        if batch.live_first:
            self._go_live(channel)
        for event in batch.events:
            if not event.replayed:
                self._go_live(channel)
                if event.key is not None:
                    self.cache(channel).apply_live(event.key, event.data, event.id, event.destroyed)
            self._call(channel, event)
        self.cursors.handed(batch)
        ack = self.cursors.ack(batch)
        if ack is not None:
            self.ctx.executor.run(ack, retry=False)

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
