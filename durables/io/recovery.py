"""What both executors know of their connection, and how they send through an outage.

"connected", "reconnecting" (since when) or "closed"; the epoch, incremented at every
reconnection and script reload (readers that keep a position on the server compare it
with theirs and attach again); who to tell of a change of state; the pauses of one
recovery: exponential backoff with jitter, bounded by `reconnect_timeout_s` from the
start of the outage (then the state is "closed" and `ConnectionLostError` is raised).
The sync executor guards it with a lock (many threads send); the asyncio one needs none.

And the recover-and-retry loop itself, written once (`attempts`): a plan of steps (send
once, pause while a slot moves, wait for the server) that each executor carries out, one
blocking and one awaiting, as it drives flows.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from ..errors import ClientClosedError, ConnectionLostError, SlotMovingError

log = logging.getLogger("durables.io.executor")
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
        log.log(
            level,
            "%s: %s -> %s",
            "server connection" if self.reports else "helper connection",
            old,
            new,
        )
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


MOVING_PAUSE_S = (0.05, 0.5)
"""The first and the longest pause before sending again while a slot moves (doubling)."""
MOVING_QUIET_S = 5.0
"""A resharding is logged once (INFO) until no slot moved for this long."""


class Moves:
    """What both executors do while the cluster moves a slot (a resharding): the operation
    is sent again after a short pause (on a fresh slot map), for at most `limit_s`
    (`reconnect_timeout_s`). MOVED, ASK and TRYAGAIN mean it did not run; a script stopped
    at a key already moved ("non local key") keeps the writes it made before that call, so
    an operation sent with `retry` is one that may run twice, as after a lost reply, and a
    reader's (without) attaches again first. Logged as what it is, once per resharding,
    never as a lost connection: the connection state does not change."""

    def __init__(self) -> None:
        self._last = -MOVING_QUIET_S

    def note(self, exc: SlotMovingError) -> None:
        now = time.monotonic()
        quiet = now - self._last < MOVING_QUIET_S
        self._last = now
        log.log(logging.DEBUG if quiet else logging.INFO, "resharding: %s; sending again", exc)

    @staticmethod
    def pauses(limit_s: float) -> Iterator[float]:
        """The pauses of one operation's retries, with jitter, ending past `limit_s`."""
        first, most = MOVING_PAUSE_S
        end = time.monotonic() + limit_s
        delay = first
        while time.monotonic() < end:
            yield delay * random.uniform(0.5, 1.5)
            delay = min(delay * 2, most)


@dataclass(frozen=True, slots=True)
class Attempt:
    """Step: send the operation(s) once; the parsed replies, or the error thrown in."""


@dataclass(frozen=True, slots=True)
class Pause:
    """Step: the slot is moving: wait `seconds` (a sync cluster client reads its slot map
    again first); nothing is given back."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Reconnect:
    """Step: wait until the server answers again (`Executor.recover(until)`); whether it
    did before the monotonic time `until` (None: within `reconnect_timeout_s`, or raise)."""

    until: float | None


@dataclass(frozen=True, slots=True)
class Probe:
    """Step of `waiting`: whether the server answers (on a short-timeout connection)."""


@dataclass(frozen=True, slots=True)
class Renew:
    """Step of `waiting`: the server answers again: renew the pool (a cluster's slot map
    too) and load the scripts; the link is connected again unless it went away anew."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Step of `waiting`: wait `seconds` before the next probe."""

    seconds: float


Step = Attempt | Pause | Reconnect
WaitStep = Probe | Renew | Backoff
ATTEMPT = Attempt()
PROBE = Probe()
RENEW = Renew()
T = TypeVar("T")


def unheard(context: str) -> ConnectionLostError:
    where = f"{context}: " if context else ""
    return ConnectionLostError(f"{where}the server has not answered since the connection was lost")


def attempts(
    link: Link,
    moves: Moves,
    retry: bool,
    context: str,
    failed: ConnectionLostError | None = None,
) -> Generator[Step, Any, Any]:
    """The recover-and-retry loop of one call, for both executors: send once; when the
    server is away (`ConnectionLostError`), wait it out and send again (with `retry`) or
    raise (without: a reader attaches again first); when a slot moves (`SlotMovingError`),
    pause and send again (without `retry`: after one pause, the epoch changed). In an
    outage nothing is sent before the server was heard (a connection opened into a black
    hole would hold its caller for the whole socket timeout). `failed`: the first attempt,
    made by the caller on its fast path, failed so."""
    pauses: Iterator[float] | None = None
    while True:
        if failed is None:
            if not link.connected and not (yield Reconnect(None if retry else time.monotonic())):
                raise unheard(context)
            try:
                return (yield ATTEMPT)
            except ConnectionLostError as raised:
                failed = raised
        error, failed = failed, None
        if isinstance(error, SlotMovingError):
            moves.note(error)
            if pauses is None:
                pauses = Moves.pauses(link.reconnect_timeout_s if retry else 1.0)
            pause = next(pauses, None)
            if pause is None:
                raise error
            yield Pause(pause)
            if not retry:
                link.reloaded()  # other operations of a pipeline may have run: attach again
                raise error
        elif not retry:
            link.lost()
            raise error
        else:
            yield Reconnect(None)


def waiting(link: Link, until: float | None) -> Generator[WaitStep, Any, bool]:
    """One recovery, for both executors (`recover`): probe the server until it answers
    (True, once renewed), with the link's backoff between probes; False if the monotonic
    time `until` came first; past `reconnect_timeout_s` since the outage began, the state
    is "closed" and `ConnectionLostError` raised (`Link.pauses`). Closing the client ends
    the wait (`ClientClosedError`). A renewal that met the outage again (the scripts did
    not load) is no reconnection: the epoch did not change, and a reader told the server
    answers would go on without attaching again; the wait goes on."""
    link.lost()
    pauses = link.pauses(until)
    while not link.connected:
        link.check_open()
        if (yield PROBE):
            yield RENEW
            if link.connected:
                return True
        pause = next(pauses, None)
        if pause is None:
            return False
        yield Backoff(pause)
    return True


__all__ = [
    "ATTEMPT",
    "PROBE",
    "RENEW",
    "Backoff",
    "Probe",
    "Renew",
    "WaitStep",
    "waiting",
    "FIRST_BACKOFF_S",
    "MAX_BACKOFF_S",
    "Attempt",
    "Link",
    "Moves",
    "Pause",
    "Reconnect",
    "State",
    "StateListener",
    "Step",
    "attempts",
    "unheard",
]
