"""Whether the server keeps what it confirmed: its eviction policy, memory and persistence.

Every guarantee durables gives assumes the server never drops a key it confirmed. An
eviction policy other than `noeviction` with a `maxmemory` set removes keys under memory
pressure (a channel's events, a durable's spec, a lease); without AOF or RDB a restart
loses everything. These are read from `INFO` (it answers where `CONFIG` is refused, as on
managed services); `CONFIG GET save` only adds whether RDB snapshots are on, where the user
may ask. Pure: the clients ask the server, this decides what it means.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .errors import UnsafeServerError

log = logging.getLogger("durables.server.embedded")

SECTIONS = ("server", "memory", "persistence", "replication")
"""The `INFO` sections read at connect (one command: `INFO server memory ...`)."""
SAFE_POLICY = "noeviction"


def info_fields(reply: object) -> dict[str, object]:
    """An `INFO` reply as a mapping, whether redis-py parsed it or it came as text."""
    if isinstance(reply, Mapping):
        return dict(reply)
    text = reply.decode() if isinstance(reply, bytes) else str(reply or "")
    fields: dict[str, object] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and not line.startswith("#"):
            fields[name.strip()] = value.strip()
    return fields


def _int(value: object, default: int = 0) -> int:
    try:
        return int(str(value))
    except ValueError:
        return default


@dataclass(frozen=True)
class ServerHealth:
    """What the server said of itself; unknown figures are 0, "" or None (`memory://`,
    whose store says none of this)."""

    used_memory: int = 0
    maxmemory: int = 0
    policy: str = SAFE_POLICY
    aof: bool | None = None
    rdb: bool | None = None
    """RDB snapshots configured (`save` not empty); None where `CONFIG GET` was refused."""
    role: str = ""
    replicas: int = 0
    where: str = ""
    rdb_changes_since_save: int | None = None

    @property
    def memory_ratio(self) -> float | None:
        """Used over max memory (None: no limit)."""
        return self.used_memory / self.maxmemory if self.maxmemory else None

    @property
    def evicting(self) -> bool:
        """Keys may be evicted now: a policy other than `noeviction` with a `maxmemory`."""
        return self.maxmemory > 0 and self.policy != SAFE_POLICY

    @property
    def full(self) -> bool:
        """At its `maxmemory` (with `noeviction`, writes that add data are refused)."""
        return self.maxmemory > 0 and self.used_memory >= self.maxmemory

    @property
    def persistent(self) -> bool | None:
        """AOF or RDB on; None when it cannot be told (AOF off, `save` not readable)."""
        if self.aof or self.rdb:
            return True
        if self.aof is None or self.rdb is None:
            return None
        return False

    def memory_text(self) -> str:
        if not self.maxmemory:
            return f"used memory {_mib(self.used_memory)}, no maxmemory"
        return f"used memory {_mib(self.used_memory)} of maxmemory {_mib(self.maxmemory)}"


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def parse_health(
    info: Mapping[str, object], save: str | None = None, where: str = ""
) -> ServerHealth:
    """`INFO` fields (and `CONFIG GET save`'s value, None if refused) as a `ServerHealth`."""
    aof = info.get("aof_enabled")
    changes = info.get("rdb_changes_since_last_save")
    return ServerHealth(
        used_memory=_int(info.get("used_memory")),
        maxmemory=_int(info.get("maxmemory")),
        policy=str(info.get("maxmemory_policy", SAFE_POLICY)),
        aof=None if aof is None else _int(aof) == 1,
        rdb=None if save is None else bool(save.strip()),
        role=str(info.get("role", "")),
        replicas=_int(info.get("connected_slaves")),
        where=where,
        rdb_changes_since_save=None if changes is None else _int(changes),
    )


def eviction_refusal(health: ServerHealth) -> UnsafeServerError:
    where = f"{health.where}: " if health.where else ""
    return UnsafeServerError(
        f"{where}the server's maxmemory-policy is {health.policy} with maxmemory "
        f"{_mib(health.maxmemory)}: at that limit it evicts keys, and confirmed events, "
        "durables and sessions vanish without a word. Set `maxmemory-policy noeviction` "
        "(then a full server refuses publishes and consumers drain it), or accept the risk "
        "knowingly with allow_eviction=True (DURABLES_ALLOW_EVICTION=1)"
    )


def warnings(health: ServerHealth, allow_eviction: bool) -> list[str]:
    """What to warn of (an evicting policy accepted, one that would evict once a limit is
    set, no persistence); refusing an evicting policy is `check`'s."""
    where = f"{health.where}: " if health.where else ""
    said = []
    if health.evicting and allow_eviction:
        said.append(
            f"{where}maxmemory-policy {health.policy} may evict durables' keys at "
            f"maxmemory {_mib(health.maxmemory)} (accepted: allow_eviction)"
        )
    elif health.policy != SAFE_POLICY and not health.maxmemory:
        said.append(
            f"{where}maxmemory-policy {health.policy} would evict durables' keys "
            "once a maxmemory is set: set `maxmemory-policy noeviction`"
        )
    if health.persistent is False:
        said.append(
            f"{where}neither AOF nor RDB is on: a restart of the server loses every "
            "event it confirmed (set `appendonly yes`)"
        )
    elif health.persistent is None and health.aof is False:
        said.append(
            f"{where}AOF is off and this user may not read `save`: make sure RDB "
            "snapshots are on, or a restart loses what the server confirmed"
        )
    return said


def check(health: ServerHealth, allow_eviction: bool) -> list[str]:
    """At connect: `UnsafeServerError` for a policy that evicts (unless accepted); the
    warnings otherwise, each logged."""
    if health.evicting and not allow_eviction:
        raise eviction_refusal(health)
    said = warnings(health, allow_eviction)
    for line in said:
        log.warning("%s", line)
    return said


@dataclass
class ServerWatch:
    """The server's settings read again while a client runs (by its heartbeat, every
    `interval_s`), so a change made at runtime is logged once and shown: `healths` by node
    (`where`), `problems` over all of them."""

    allow_eviction: bool
    interval_s: float
    clock: Callable[[], float] = time.monotonic
    healths: dict[str, ServerHealth] = field(default_factory=dict)
    _said: dict[str, list[str]] = field(default_factory=dict)
    _next: float = 0.0

    def due(self) -> bool:
        """Whether a reading is due; the next one is then due an interval later (a reading
        that fails is not tried again at every beat)."""
        now = self.clock()
        if now < self._next:
            return False
        self._next = now + self.interval_s
        return True

    @property
    def problems(self) -> list[str]:
        return [line for lines in self._said.values() for line in lines]

    def observe(self, health: ServerHealth, *, quiet: bool = False) -> None:
        """Take a reading: problems not seen at the last one are logged, once (`quiet`: at
        connect, where `check` said them already)."""
        previous = self.healths.get(health.where)
        if previous is not None and health.rdb is None:
            health = dataclasses.replace(health, rdb=previous.rdb)  # read at connect only
        self.healths[health.where] = health
        problems = warnings(health, self.allow_eviction)
        if health.evicting and not self.allow_eviction:
            problems.insert(0, str(eviction_refusal(health)))
        level = logging.ERROR if health.evicting else logging.WARNING
        said = self._said.get(health.where, [])
        for line in problems:
            if line not in said and not quiet:
                log.log(level, "%s", line)
        self._said[health.where] = problems


__all__ = [
    "SECTIONS",
    "ServerHealth",
    "ServerWatch",
    "check",
    "eviction_refusal",
    "info_fields",
    "parse_health",
    "warnings",
]
