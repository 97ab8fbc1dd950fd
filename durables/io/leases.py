"""Keeps leases alive from one background thread per client.

Redis has no timers for us: a consumer or session proves it is alive by renewing a
lease key (`PEXPIRE`). One daemon thread renews every lease of a client at a third
of the lease time, all in one pipeline, and tells a holder when its lease is gone.
It sends through an executor of its own with a short socket timeout, so a hung
application socket (30 s by default) cannot starve renewals (the lease is shorter).
With no lease to renew it pings, so a black-holed connection (no reset, packets
dropped) is noticed within a beat and a socket timeout: `on_failure` then breaks the
application's connections, and its calls start reconnecting at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import (
    AccessDeniedError,
    DurableInUseError,
    DurablesError,
    LeaseLostError,
    SessionInUseError,
    SlotMovingError,
)
from ..ops import server_info as server_ops
from ..ops.base import Op, command
from ..ops.flows import Flow, call, send
from ..options import Wait, wait_seconds
from ..server_health import ServerWatch

if TYPE_CHECKING:
    from .executor import Executor

log = logging.getLogger(__name__)
PING: Op[object] = command("PING", context="heartbeat")
T = TypeVar("T")

LAPSE_MARGIN_S = 0.02
"""Tried again this long after the lease's time left, so the server has let it lapse."""


def waiting_out(
    take: Callable[[], Flow[T]],
    wait_s: float,
    clock: Callable[[], float],
    pause: Callable[[float], object],
) -> Flow[T]:
    """`take()`, and again each time the other holder's lease should have lapsed, for up to
    `wait_s` seconds; then its in-use error, raised without the server's reply chained to
    it nor the frames that translated it (the user's traceback ends at what to do, not at
    the raw reply)."""
    deadline = clock() + wait_s
    while True:
        try:
            return (yield from take())
        except (DurableInUseError, SessionInUseError) as exc:
            if isinstance(exc, LeaseLostError):
                raise
            left = deadline - clock()
            if left <= 0:  # an expected refusal: the frames below it are noise to the user
                raise exc.with_traceback(None) from None
            lease_s = exc.lease_left_s if exc.lease_left_s is not None else 0.1
            yield from call(pause, min(lease_s + LAPSE_MARGIN_S, left))


@dataclass(frozen=True)
class Lease:
    """One lease to keep alive: the holder's token, the renewal (an operation whose reply
    is false once the lease is gone), what to do when it is lost, and when the server
    refuses the renewal (as an ACL narrowed under it: by default, as lost)."""

    token: str
    renew: Op[bool]
    on_lost: Callable[[], None]
    on_refused: Callable[[AccessDeniedError], None] | None = None
    on_held: Callable[[float], None] | None = None
    """Told, after each renewal, when (local monotonic seconds) the renewal was sent: the
    lease is the holder's at least until then plus the lease time."""


class LeaseHolder:
    """What a reader that holds a lease shares: it learns of a lost lease from the
    heartbeat, and attaches again before its next read."""

    _lost = False
    _context = ""

    def _on_lost(self) -> None:
        self._lost = True


class Beats:
    """The leases a heartbeat renews, and what one beat does, for both clients: renew them
    all in one round trip (or ping), tell the holders of those gone; on failure, call
    `on_failure` (a function or a coroutine function)."""

    def __init__(
        self,
        lease_ms: int,
        on_failure: Callable[[], object] | None,
        lock: AbstractContextManager[Any],
        watch: ServerWatch | None = None,
    ) -> None:
        self.watch = watch
        """Reads the server's settings again every so often, in a beat's round trip."""
        self._lease_ms = lease_ms
        self._on_failure = on_failure
        self._failing = False
        self._leases: dict[str, Lease] = {}
        self._lock = lock

    @property
    def interval_s(self) -> float:
        return self._lease_ms / 3000

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._leases[lease.token] = lease

    def remove(self, token: str) -> None:
        with self._lock:
            self._leases.pop(token, None)

    def _drop(self, lease: Lease) -> bool:
        """Forget `lease`, if it is still the one registered for its token: a holder that
        attached again while a beat was under way registered a new one, which that beat's
        reply says nothing of (dropped, it would never be renewed again)."""
        with self._lock:
            if self._leases.get(lease.token) is not lease:
                return False
            del self._leases[lease.token]
            return True

    def beating(self) -> Flow[None]:
        """One beat over the leases held now."""
        with self._lock:
            leases = list(self._leases.values())
        ops: list[Op[Any]] = [lease.renew for lease in leases] or [PING]
        checking = self.watch is not None and self.watch.due()
        sent = time.monotonic()
        try:
            try:
                held = yield from send(
                    [*ops, server_ops.health()] if checking else ops, retry=False
                )
                if checking and self.watch is not None:
                    self.watch.observe(held.pop())
            except AccessDeniedError:  # the server answers, and refused a renewal: which?
                held = yield from self._one_by_one(leases)
        except SlotMovingError as exc:  # the server answers: a resharding, not an outage
            log.debug("heartbeat: %s; the next beat tries again", exc)  # the executor said it
            return
        except DurablesError as exc:  # the server is away: the next beat tries again
            log.log(
                logging.DEBUG if self._failing else logging.WARNING,
                "heartbeat failed (%d lease(s)): %s",
                len(leases),
                exc,
            )
            self._failing = True
            if self._on_failure is not None:
                yield from call(self._on_failure)
            return
        self._failing = False
        self._judge(leases, held if leases else [], sent)

    def _judge(self, leases: list[Lease], held: list[bool | None], sent: float) -> None:
        """Tell the holders what their renewals (sent at `sent`) found: gone, or held."""
        for lease, still in zip(leases, held, strict=True):
            if still is None:
                continue
            if not still:
                if self._drop(lease):
                    lease.on_lost()
            elif lease.on_held is not None:
                lease.on_held(sent)

    def _one_by_one(self, leases: list[Lease]) -> Flow[list[bool | None]]:
        """Renew each lease alone: the holders of those the server refuses (as an ACL
        narrowed under them) are told so here (as lost, if they have no `on_refused`), and
        they are dropped; the reply of each other lease (None for those told already).
        Not an outage: the application's connections stay."""
        held: list[bool | None] = []
        for lease in leases:
            try:
                held.append((yield from send([lease.renew], retry=False))[0])
            except AccessDeniedError as exc:
                log.warning("heartbeat: the server refused a renewal: %s", exc)
                held.append(None)
                if not self._drop(lease):
                    continue  # registered anew meanwhile: the next beat judges that one
                if lease.on_refused is not None:
                    lease.on_refused(exc)
                else:
                    lease.on_lost()
        return held


class Heartbeat(Beats):
    """Renews registered leases every `lease_ms / 3` from a thread until closed."""

    def __init__(
        self,
        executor: Executor,
        lease_ms: int,
        on_failure: Callable[[], None] | None = None,
        watch: ServerWatch | None = None,
    ) -> None:
        super().__init__(lease_ms, on_failure, threading.Lock(), watch)
        self._executor = executor
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()

    def start(self) -> None:
        with self._starting:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="durables-heartbeat", daemon=True
                )
                self._thread.start()

    def add(self, lease: Lease) -> None:
        super().add(lease)
        self.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._executor.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._executor.drive(self.beating())
            except Exception:  # a beat that fails in a way not foreseen: the next one tries
                log.exception("heartbeat: a beat failed")


__all__ = ["Beats", "Heartbeat", "Lease", "LeaseHolder", "Wait", "wait_seconds", "waiting_out"]
