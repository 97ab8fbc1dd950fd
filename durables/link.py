"""What both executors know of their connection, and how long they wait in an outage.

"connected", "reconnecting" (since when) or "closed"; the epoch, incremented at every
reconnection and script reload (readers that keep a position on the server compare it
with theirs and attach again); who to tell of a change of state; and the pauses of one
recovery: exponential backoff with jitter, bounded by `reconnect_timeout_s` from the
start of the outage (then the state is "closed" and `ConnectionLostError` is raised).
The sync executor guards it with a lock (many threads send); the asyncio one needs none.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal

from .errors import ClientClosedError, ConnectionLostError

log = logging.getLogger("durables.executor")
State = Literal["connected", "reconnecting", "closed"]
StateListener = Callable[[str, str], object]
FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0


class Link:
    """One executor's connection state (see the module's docstring)."""

    def __init__(
        self,
        reconnect_timeout_s: float,
        lock: AbstractContextManager[Any] | None = None,
        *,
        reports: bool = True,
    ) -> None:
        self.reconnect_timeout_s = reconnect_timeout_s
        self.reports = reports
        """Whether its changes are logged: the client's own connection reports the server's
        state; a helper's (the heartbeat's) would only say the same again, or report its
        own closing as the server's."""
        self.epoch = 0
        self._lock = lock if lock is not None else nullcontext()
        self._state: State = "connected"
        self._since = 0.0
        self._listeners: list[StateListener] = []
        self.shut = False
        """Closed by its owner: nothing is sent any more."""

    @property
    def state(self) -> State:
        return self._state

    @property
    def connected(self) -> bool:
        return self._state == "connected"

    def on_state(self, listener: StateListener) -> None:
        """Call `listener(old, new)` at every change of state."""
        self._listeners.append(listener)

    def _set(self, new: State, *, quiet: bool = False) -> None:
        """Change state; the caller holds the lock."""
        old, self._state = self._state, new
        if old == new:
            return
        if not self.reports:
            quiet = True
        level = logging.DEBUG if quiet else logging.INFO if new == "connected" else logging.WARNING
        log.log(level, "%s: %s -> %s", "server connection" if self.reports else "helper connection",
                old, new)  # fmt: skip
        for listener in list(self._listeners):
            try:
                listener(old, new)
            except Exception:
                log.exception("state listener failed on %s -> %s", old, new)

    def lost(self) -> None:
        """Note the start of an outage (state "reconnecting"), if not noted yet."""
        with self._lock:
            if self._state == "connected":
                self._since = time.monotonic()
                self._set("reconnecting")

    def reloaded(self) -> None:
        """The scripts were loaded again: commands pipelined after a missing one ran, so
        readers treat it as a reconnection."""
        with self._lock:
            self.epoch += 1

    def reconnected(self) -> None:
        with self._lock:
            if self._state != "connected":
                self.epoch += 1
                self._set("connected")

    def close(self) -> None:
        self.shut = True
        with self._lock:
            self._set("closed", quiet=True)

    def check_open(self) -> None:
        """`ClientClosedError` once closed: a closed client sends nothing (a new
        connection made for it would never be closed)."""
        if self.shut:
            raise ClientClosedError("this client is closed; connect() again to go on")

    def pauses(self, until: float | None) -> Iterator[float]:
        """How long to wait before each next probe of one recovery; ends when the monotonic
        time `until` comes first, raises `ConnectionLostError` (state "closed") once
        `reconnect_timeout_s` have passed since the outage began."""
        delay = FIRST_BACKOFF_S
        while True:
            now = time.monotonic()
            deadline = self._since + self.reconnect_timeout_s
            if now >= deadline:
                with self._lock:
                    self._set("closed")
                raise ConnectionLostError(
                    f"the server did not answer for {self.reconnect_timeout_s:g} s "
                    f"(reconnect_timeout_s); giving up"
                )
            if until is not None and now >= until:
                return
            stop = deadline if until is None else min(deadline, until)
            yield max(0.0, min(delay * random.uniform(0.5, 1.5), stop - now))
            delay = min(delay * 2, MAX_BACKOFF_S)


__all__ = ["FIRST_BACKOFF_S", "MAX_BACKOFF_S", "Link", "State", "StateListener"]
