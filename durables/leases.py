"""Keeps consumer leases alive from one background thread per client.

Redis has no timers for us: a consumer proves it is alive by renewing a lease
key (`SET ... PX`). One daemon thread renews every lease of a client at a third
of the lease time, and tells a consumer when its lease is gone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from redis.exceptions import RedisError

from .errors import DurableInUseError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lease:
    """One lease to keep alive: the holder's token, how to renew it (False: it is gone),
    what to do when it is lost."""

    token: str
    renew: Callable[[], bool]
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
            raise DurableInUseError(f"{self._context}: this consumer lost its lease")


class Heartbeat:
    """Renews registered leases every `lease_ms / 3` until closed."""

    def __init__(self, lease_ms: int) -> None:
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

    def _run(self) -> None:
        while not self._stop.wait(self._lease_ms / 3000):
            with self._lock:
                leases = list(self._leases.values())
            for lease in leases:
                self._beat(lease)

    def _beat(self, lease: Lease) -> None:
        try:
            held = lease.renew()
        except RedisError as exc:  # the server is away: the next beat tries again
            log.warning("could not renew lease %s: %s", lease.token, exc)
            return
        if not held:
            self.remove(lease.token)
            lease.on_lost()
