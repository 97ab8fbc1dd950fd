"""Keeps leases alive from one background thread per client.

Redis has no timers for us: a consumer or session proves it is alive by renewing a
lease key (`PEXPIRE`). One daemon thread renews every lease of a client at a third
of the lease time, all in one pipeline, and tells a holder when its lease is gone.
It sends through an executor of its own with a short socket timeout, so a hung
application socket (30 s by default) cannot starve renewals (the lease is shorter).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import DurablesError, LeaseLostError

if TYPE_CHECKING:
    from .executor import Executor
    from .ops.base import Op

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lease:
    """One lease to keep alive: the holder's token, the renewal (an operation whose reply
    is false once the lease is gone), what to do when it is lost."""

    token: str
    renew: Op[bool]
    on_lost: Callable[[], None]


class LeaseHolder:
    """What a reader that holds a lease shares: it learns of a lost lease from the
    heartbeat and refuses to go on."""

    _lost = False
    _context = ""

    def _on_lost(self) -> None:
        self._lost = True

    def _check_lease(self) -> None:
        if self._lost:
            raise LeaseLostError(f"{self._context}: this consumer lost its lease")


class Heartbeat:
    """Renews registered leases every `lease_ms / 3` until closed."""

    def __init__(self, executor: Executor, lease_ms: int) -> None:
        self._executor = executor
        self._lease_ms = lease_ms
        self._leases: dict[str, Lease] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._leases[lease.token] = lease
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="durables-heartbeat", daemon=True
                )
                self._thread.start()

    def remove(self, token: str) -> None:
        with self._lock:
            self._leases.pop(token, None)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._executor.close()

    def _run(self) -> None:
        while not self._stop.wait(self._lease_ms / 3000):
            with self._lock:
                leases = list(self._leases.values())
            if leases:
                self.beat(leases)

    def beat(self, leases: list[Lease]) -> None:
        """Renew `leases` in one round trip; tell the holders of those that are gone."""
        try:
            held = self._executor.run_all([lease.renew for lease in leases])
        except DurablesError as exc:  # the server is away: the next beat tries again
            log.warning("could not renew %d lease(s): %s", len(leases), exc)
            return
        for lease, still in zip(leases, held, strict=True):
            if not still:
                self.remove(lease.token)
                lease.on_lost()


__all__ = ["Heartbeat", "Lease", "LeaseHolder"]
