"""The threads a client owns, and the order they stop in.

A client starts threads on the application's behalf: subscriptions and session
deliveries (they call listeners), the ack flusher (deferred acknowledgements, with
`ack_flush_interval_s`), a housekeeper (trims channels this client used) and the
heartbeat (keeps leases). `Runtime.close()` stops them in that order, so
nothing delivers after the client is closed and leases are released, not left to
lapse.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from ..errors import ChannelNotFoundError, DurablesError
from .leases import Heartbeat

log = logging.getLogger(__name__)
MIN_ROUND_S = 0.05


class Closable(Protocol):
    def close(self) -> None: ...


class Housekeeper:
    """Trims the channels this client used, every `interval_s`, on a thread of its own:
    a publish or an ack only marks its channel (`touch`). With `interval_s == 0` the
    trim runs at once on the caller's thread instead (tests, tiny deployments)."""

    def __init__(self, trim: Callable[[str], object], interval_s: float) -> None:
        self._trim = trim
        self._interval_s = interval_s
        self._touched: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def touch(self, channel: str) -> None:
        """Note that `channel` changed; cheap enough for every publish and ack."""
        if self._interval_s == 0:
            self._trim_quietly(channel)
            return
        if channel in self._touched:
            return
        with self._lock:
            self._touched.add(channel)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="durables-housekeeper", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(max(MIN_ROUND_S, self._interval_s)):
            with self._lock:
                channels, self._touched = self._touched, set()
            for channel in sorted(channels):
                if self._stop.is_set():
                    return
                self._trim_quietly(channel)

    def _trim_quietly(self, channel: str) -> None:
        try:
            self._trim(channel)
        except ChannelNotFoundError:
            pass  # deleted meanwhile: nothing to trim
        except DurablesError as exc:  # opportunistic: the next round tries again
            log.debug("housekeeping %r failed: %s", channel, exc)
            with self._lock:
                self._touched.add(channel)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()


class Deferring(Protocol):
    def flush_acks(self) -> None: ...


class AckFlusher:
    """Sends deferred acknowledgements that no read carried out within `interval_s`, on a
    thread of its own (started at the first deferral); `close()` sends what is left."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._due: dict[int, tuple[float, Deferring]] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    def schedule(self, owner: Deferring) -> None:
        """`owner` holds deferred acks: flush them within the interval."""
        with self._cond:
            if id(owner) in self._due or self._closed:
                return
            self._due[id(owner)] = (time.monotonic() + self.interval_s, owner)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="durables-acks", daemon=True)
                self._thread.start()
            self._cond.notify()

    def cancel(self, owner: Deferring) -> None:
        with self._cond:
            self._due.pop(id(owner), None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    now = time.monotonic()
                    due = [key for key, (at, _) in self._due.items() if at <= now]
                    if due:
                        break
                    wake = min((at for at, _ in self._due.values()), default=now + 3600)
                    self._cond.wait(wake - now)
                if self._closed:
                    return
                owners = [self._due.pop(key)[1] for key in due]
            for owner in owners:
                self._flush_quietly(owner)

    @staticmethod
    def _flush_quietly(owner: Deferring) -> None:
        try:
            owner.flush_acks()
        except DurablesError as exc:  # the next read carries them, or the close
            log.warning("deferred acknowledgements of %r not sent yet: %s", owner, exc)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            owners = [owner for _, owner in self._due.values()]
            self._due.clear()
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        for owner in owners:
            self._flush_quietly(owner)


class Runtime:
    """Owns a client's threads: workers (subscriptions, session deliveries), the
    housekeeper and the heartbeat; `close()` stops them in that order."""

    def __init__(
        self, heartbeat: Heartbeat, housekeeper: Housekeeper, acks: AckFlusher | None = None
    ) -> None:
        self.heartbeat = heartbeat
        self.housekeeper = housekeeper
        self.acks = acks or AckFlusher(0.0)
        self._workers: dict[int, Closable] = {}
        self._lock = threading.Lock()

    def own(self, worker: Closable) -> None:
        with self._lock:
            self._workers[id(worker)] = worker

    def disown(self, worker: Closable) -> None:
        with self._lock:
            self._workers.pop(id(worker), None)

    def close(self) -> None:
        with self._lock:
            workers = list(self._workers.values())
            self._workers.clear()
        for worker in reversed(workers):  # the newest first
            try:
                worker.close()
            except DurablesError as exc:
                log.warning("closing %r: %s", worker, exc)
        self.acks.close()
        self.housekeeper.close()
        self.heartbeat.close()


__all__ = ["AckFlusher", "Closable", "Deferring", "Housekeeper", "Runtime"]
