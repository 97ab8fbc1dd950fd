"""A Sentinel set for tests: a primary, replicas and sentinels, built from `RedisProcess`.

Every process is a child of the test process on 127.0.0.1, every wait is bounded, and
`stop()` leaves nothing behind.

Nodes restart with the config file they left behind (sentinels and CONFIG REWRITE
change it), as a real node would after a crash; see `_KeptConfigProcess`.
Sentinels run the same binary through a symlink named `redis-sentinel`: both
valkey-server and redis-server start in sentinel mode when their argv[0] holds
that name, which lets `RedisProcess` start them unchanged.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from pathlib import Path
from typing import Any, Self

import redis

from .ha_common import (
    DATA_NODE_DEFAULTS,
    FAILOVER_TIMEOUT_S,
    REJOIN_TIMEOUT_S,
    SET_START_TIMEOUT_S,
    info_of,
    is_running,
    poll,
    role_of,
    safe_role,
    start_with_retries,
    stop_all,
)
from .servers import HOST, RedisProcess, Started, free_port


class _KeptConfigProcess(RedisProcess):
    """A node that restarts with its config file as the server left it.

    Sentinel rewrites its own file (ids, epochs, known replicas and sentinels) and
    makes data nodes run CONFIG REWRITE after REPLICAOF; a restarted node must see
    those changes, not the config it was first started with.
    """

    def config_text(self) -> str:
        if self.config_path.exists():
            return self.config_path.read_text()
        return super().config_text()


class _SentinelProcess(_KeptConfigProcess):
    """A sentinel: `RedisProcess` run through a `redis-sentinel` symlink to the binary."""

    def __init__(self, binary: Path, workdir: Path, *, port: int, extra: dict[str, str]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        link = workdir / "redis-sentinel"
        if not link.exists():
            link.symlink_to(binary)
        super().__init__(link, workdir, port=port, extra=extra)

    def _ready(self) -> bool:
        # A sentinel's INFO has no persistence section; PING is the whole check.
        try:
            with self.client() as client:
                return bool(client.ping())
        except (redis.ConnectionError, redis.TimeoutError):
            return False


class SentinelSet(Started):
    """A primary, `replicas` replicas and `sentinels` sentinels on free ports of 127.0.0.1.

    Data nodes run AOF with fsync always; sentinels use quorum 2, down-after 1000 ms,
    failover-timeout 5000 ms and parallel-syncs 1. Use as a context manager.
    """

    def __init__(
        self,
        binary: Path,
        workdir: Path,
        *,
        replicas: int = 2,
        sentinels: int = 3,
        service: str = "mymaster",
        quorum: int = 2,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 5000,
        extra: dict[str, str] | None = None,
    ) -> None:
        if replicas < 1 or sentinels < quorum:
            raise ValueError("need at least one replica and as many sentinels as the quorum")
        self.binary = binary
        self.workdir = workdir
        self.service = service
        self.replica_count = replicas
        self.sentinel_count = sentinels
        self.quorum = quorum
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.extra = {**DATA_NODE_DEFAULTS, **(extra or {})}
        """Config lines of every data node (not the sentinels)."""
        self.data_nodes: list[RedisProcess] = []
        """Primary first as started; after failovers `primary()` says which is which."""
        self.sentinels: list[RedisProcess] = []
        self._killed_at: dict[int, float] = {}
        self._ports: set[int] = set()

    # -- life cycle -------------------------------------------------------------------

    def start(self) -> Self:
        """Start everything; return once replicas are in sync and sentinels know it all."""
        try:
            self._start_data_nodes()
            self.wait_replicas_in_sync(SET_START_TIMEOUT_S)
            self._start_sentinels()
            poll("sentinels know the set", self._sentinels_know_all, SET_START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop sentinels first (no failover while stopping), then replicas, then primaries."""
        ordered = list(self.sentinels)
        data = [p for p in self.data_nodes if is_running(p)]
        masters = [p for p in data if safe_role(p) == "master"]
        ordered += [p for p in data if p not in masters] + masters
        ordered += [p for p in self.data_nodes if p not in ordered]
        stop_all(ordered)

    # -- what clients see ---------------------------------------------------------------

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        return [(HOST, s.port) for s in self.sentinels]

    @property
    def url(self) -> str:
        hosts = ",".join(f"{HOST}:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}"

    def primary(self) -> RedisProcess:
        """The data node most sentinels name as primary now."""
        named = self._named_primaries()
        if not named:
            raise RuntimeError("no sentinel answered")
        port, _ = Counter(named).most_common(1)[0]
        return self._node(port)

    def replicas(self) -> list[RedisProcess]:
        """Running data nodes other than the current primary."""
        primary = self.primary()
        return [p for p in self.data_nodes if p is not primary and is_running(p)]

    # -- faults -----------------------------------------------------------------------

    def kill_primary(self) -> RedisProcess:
        """kill -9 the current primary; return it (its `restart` is `self.restart(it)`)."""
        primary = self.primary()
        primary.kill9()
        self._killed_at[primary.port] = time.monotonic()
        return primary

    def wait_for_failover(
        self, old: RedisProcess, timeout: float = FAILOVER_TIMEOUT_S
    ) -> tuple[RedisProcess, float]:
        """Until every running sentinel names one other primary that answers as master.

        Returns the new primary and the seconds since `old` was killed by `kill_primary`
        (else since this call).
        """
        since = self._killed_at.get(old.port, time.monotonic())

        def promoted() -> RedisProcess | None:
            named = self._named_primaries()
            if len(named) != len(self.sentinels) or len(set(named)) != 1:
                return None
            if named[0] == old.port:
                return None
            new = self._node(named[0])
            return new if role_of(new) == "master" else None

        new = poll(f"failover away from port {old.port}", promoted, timeout)
        return new, time.monotonic() - since

    def restart(self, process: RedisProcess, *, timeout: float = REJOIN_TIMEOUT_S) -> RedisProcess:
        """Start a killed data node with the config it left; wait until it is a synced replica.

        A former primary comes back as a master with its old data; the sentinels turn it
        into a replica of the current primary (after their 8 s grace for a node reporting
        the wrong role, so this takes roughly 10-20 s). A sentinel restarts as well.
        """
        process.restart()
        if process in self.sentinels:
            return process

        def rejoined() -> bool:
            primary = self.primary()
            info = info_of(process, "replication")
            return (
                info["role"] == "slave"
                and int(info["master_port"]) == primary.port
                and info["master_link_status"] == "up"
            )

        poll(f"port {process.port} rejoins as a replica", rejoined, timeout)
        # ...and the primary lists it as online, so that WAIT counts it.
        self.wait_replicas_in_sync(timeout)
        return process

    def wait_replicas_in_sync(self, timeout: float = SET_START_TIMEOUT_S) -> None:
        """Until every running data node but the primary replicates from it, link up."""

        def primary_of() -> RedisProcess:
            # Before the sentinels run, the first node is the primary.
            return self.primary() if self.sentinels else self.data_nodes[0]

        def in_sync() -> bool:
            primary = primary_of()
            running = [p for p in self.data_nodes if p is not primary and is_running(p)]
            for replica in running:
                info = info_of(replica, "replication")
                if info["role"] != "slave" or int(info["master_port"]) != primary.port:
                    return False
                if info["master_link_status"] != "up":
                    return False
            seen = _online_replica_ports(info_of(primary, "replication"))
            return seen >= {p.port for p in running}

        poll("replicas in sync", in_sync, timeout)

    # -- internals --------------------------------------------------------------------

    def _new_port(self) -> int:
        while True:
            port = free_port()
            if port not in self._ports:
                self._ports.add(port)
                return port

    def _start_data_nodes(self) -> None:
        for index in range(1 + self.replica_count):
            extra = dict(self.extra)
            if index > 0:
                extra["replicaof"] = f"{HOST} {self.data_nodes[0].port}"
            workdir = self.workdir / f"node{index}"

            def make(
                port: int, workdir: Path = workdir, extra: dict[str, str] = extra
            ) -> RedisProcess:
                return _KeptConfigProcess(
                    self.binary, workdir, port=port, appendfsync="always", extra=extra
                )

            self.data_nodes.append(start_with_retries(make, self._new_port))

    def _start_sentinels(self) -> None:
        primary = self.data_nodes[0]
        name = self.service
        extra = {
            "protected-mode": "no",
            "appendonly": "no",
            "sentinel resolve-hostnames": "no",
            "sentinel monitor": f"{name} {HOST} {primary.port} {self.quorum}",
            "sentinel down-after-milliseconds": f"{name} {self.down_after_ms}",
            "sentinel failover-timeout": f"{name} {self.failover_timeout_ms}",
            "sentinel parallel-syncs": f"{name} 1",
        }
        for index in range(self.sentinel_count):
            workdir = self.workdir / f"sentinel{index}"

            def make(port: int, workdir: Path = workdir) -> RedisProcess:
                return _SentinelProcess(self.binary, workdir, port=port, extra=extra)

            self.sentinels.append(start_with_retries(make, self._new_port))

    def _sentinels_know_all(self) -> bool:
        primary = self.data_nodes[0]
        replicas = {p.port for p in self.data_nodes[1:]}
        for sentinel in self.sentinels:
            with sentinel.client() as client:
                state = client.sentinel_master(self.service)
                if state["port"] != primary.port or not state["is_master"]:
                    return False
                if state["num-other-sentinels"] != self.sentinel_count - 1:
                    return False
                known = client.sentinel_slaves(self.service)
                healthy = {
                    int(r["port"])
                    for r in known
                    if not r["is_sdown"]
                    and not r["is_disconnected"]
                    and r.get("master-link-status") == "ok"
                }
                if healthy != replicas:
                    return False
        return True

    def _named_primaries(self) -> list[int]:
        """The primary port each answering sentinel names."""
        named: list[int] = []
        for sentinel in self.sentinels:
            if not is_running(sentinel):
                continue
            with contextlib.suppress(redis.RedisError, OSError), sentinel.client() as client:
                address = client.sentinel_get_master_addr_by_name(self.service)
                if address is not None:
                    named.append(int(address[1]))
        return named

    def _node(self, port: int) -> RedisProcess:
        for process in self.data_nodes:
            if process.port == port:
                return process
        raise RuntimeError(f"sentinels name port {port}, which is not a node of this set")


def _online_replica_ports(replication: dict[str, Any]) -> set[int]:
    """Ports of the replicas a primary's INFO replication lists as online."""
    ports: set[int] = set()
    for key, value in replication.items():
        if key.startswith("slave") and isinstance(value, dict) and value.get("state") == "online":
            ports.add(int(value["port"]))
    return ports


__all__ = ["SentinelSet"]
