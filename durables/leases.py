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
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import DurablesError
from .ops.base import Op, command

if TYPE_CHECKING:
    from .executor import Executor

log = logging.getLogger(__name__)
PING: Op[object] = command("PING", context="heartbeat")


@dataclass(frozen=True)
class Lease:
    """One lease to keep alive: the holder's token, the renewal (an operation whose reply
    is false once the lease is gone), what to do when it is lost."""

    token: str
    renew: Op[bool]
    on_lost: Callable[[], None]


class LeaseHolder:
    """What a reader that holds a lease shares: it learns of a lost lease from the
    heartbeat, and attaches again before its next read."""

    _lost = False
    _context = ""

    def _on_lost(self) -> None:
        self._lost = True


class Heartbeat:
    """Renews registered leases every `lease_ms / 3` until closed."""

    def __init__(
        self, executor: Executor, lease_ms: int, on_failure: Callable[[], None] | None = None
    ) -> None:
        self._executor = executor
        self._lease_ms = lease_ms
        self._on_failure = on_failure
        self._failing = False
        self._leases: dict[str, Lease] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="durables-heartbeat", daemon=True
                )
                self._thread.start()

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._leases[lease.token] = lease
        self.start()

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
            self.beat(leases)

    def beat(self, leases: list[Lease]) -> None:
        """Renew `leases` in one round trip (or ping); tell the holders of those gone."""
        ops: list[Op[Any]] = [lease.renew for lease in leases] or [PING]
        try:
            held = self._executor.run_all(ops, retry=False)
        except DurablesError as exc:  # the server is away: the next beat tries again
            log.log(logging.DEBUG if self._failing else logging.WARNING,
                    "heartbeat failed (%d lease(s)): %s", len(leases), exc)  # fmt: skip
            self._failing = True
            if self._on_failure is not None:
                self._on_failure()
            return
        self._failing = False
        if not leases:
            return
        for lease, still in zip(leases, held, strict=True):
            if not still:
                self.remove(lease.token)
                lease.on_lost()


__all__ = ["Heartbeat", "Lease", "LeaseHolder"]
