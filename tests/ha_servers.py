"""Highly available server sets for tests: Sentinel and Cluster, built from `RedisProcess`.

`SentinelSet` runs a primary, replicas and sentinels; `Cluster` runs cluster-mode
primaries (and a replica each if asked). Every process is a child of the test
process on 127.0.0.1, every wait is bounded, and `stop()` leaves nothing behind.

Nodes restart with the config file they left behind (sentinels and CONFIG REWRITE
change it), as a real node would after a crash; see `_KeptConfigProcess`.
Sentinels run the same binary through a symlink named `redis-sentinel`: both
valkey-server and redis-server start in sentinel mode when their argv[0] holds
that name, which lets `RedisProcess` start them unchanged.
"""

from __future__ import annotations

import contextlib
import random
import socket
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import redis

from .servers import HOST, RedisProcess, free_port

T = TypeVar("T")

POLL_S = 0.05
SET_START_TIMEOUT_S = 30.0
FAILOVER_TIMEOUT_S = 20.0
REJOIN_TIMEOUT_S = 40.0
CLUSTER_SLOTS = 16384
MAX_CLUSTER_PORT = 55535
"""Cluster mode refuses higher ports: the bus port is port + 10000."""
CLUSTER_PORT_RANGE = (20000, 22700)
"""Cluster ports are drawn from here, so that they and their bus ports (30000-32700)
stay below MAX_CLUSTER_PORT and below Linux's ephemeral range (32768 up)."""
_START_ATTEMPTS = 3
DATA_NODE_DEFAULTS = {
    # A new replica gets its copy at once instead of after the default 5 s.
    "repl-diskless-sync-delay": "0",
    # SIGTERM of a primary exits at once instead of waiting up to 10 s for lagging
    # replicas (Redis 7), which keeps teardown short; pass extra= to restore it.
    "shutdown-timeout": "0",
}


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


def _poll(what: str, check: Callable[[], T | None], timeout_s: float) -> T:
    """Call `check` until it returns something other than None or False; bounded.

    Redis and socket errors count as "not yet"; the last one is in the TimeoutError.
    """
    deadline = time.monotonic() + timeout_s
    last: str = "no answer yet"
    while True:
        try:
            result = check()
        except (redis.RedisError, OSError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        else:
            if result is not None and result is not False:
                return result
            last = f"check returned {result!r}"
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s} s ({last})")
        time.sleep(POLL_S)


def _start_with_retries(
    make: Callable[[int], RedisProcess], ports: Callable[[], int]
) -> RedisProcess:
    """Start a process; if its port was taken meanwhile (another test run), try another."""
    for attempt in range(_START_ATTEMPTS):
        process = make(ports())
        try:
            return process.start()
        except RuntimeError:
            process.kill9()
            if attempt == _START_ATTEMPTS - 1:
                raise
            # A fresh config next time: the failed start wrote one with the old port.
            process.config_path.unlink(missing_ok=True)
    raise AssertionError("unreachable")


def _info(process: RedisProcess, section: str) -> dict[str, Any]:
    with process.client() as client:
        info: dict[str, Any] = client.info(section)
        return info


def _role(process: RedisProcess) -> str:
    """`master` or `slave`, from INFO replication (ROLE's reply differs between servers)."""
    return str(_info(process, "replication")["role"])


def is_running(process: RedisProcess) -> bool:
    """Whether `process` was started and not stopped or killed since."""
    try:
        return process.pid > 0  # `pid` raises RuntimeError when not running
    except RuntimeError:
        return False


def _safe_role(process: RedisProcess) -> str | None:
    try:
        return _role(process)
    except (redis.RedisError, OSError):
        return None


def _stop_all(processes: list[RedisProcess]) -> None:
    """Stop every process; one that fails to stop does not keep the others running."""
    errors: list[BaseException] = []
    for process in processes:
        try:
            process.stop()
        except BaseException as exc:
            errors.append(exc)
            process.kill9()
    if errors:
        raise errors[0]


class SentinelSet:
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

    def start(self) -> SentinelSet:
        """Start everything; return once replicas are in sync and sentinels know it all."""
        try:
            self._start_data_nodes()
            self.wait_replicas_in_sync(SET_START_TIMEOUT_S)
            self._start_sentinels()
            _poll("sentinels know the set", self._sentinels_know_all, SET_START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop sentinels first (no failover while stopping), then replicas, then primaries."""
        ordered = list(self.sentinels)
        data = [p for p in self.data_nodes if is_running(p)]
        masters = [p for p in data if _safe_role(p) == "master"]
        ordered += [p for p in data if p not in masters] + masters
        ordered += [p for p in self.data_nodes if p not in ordered]
        _stop_all(ordered)

    def __enter__(self) -> SentinelSet:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

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
            return new if _role(new) == "master" else None

        new = _poll(f"failover away from port {old.port}", promoted, timeout)
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
            info = _info(process, "replication")
            return (
                info["role"] == "slave"
                and int(info["master_port"]) == primary.port
                and info["master_link_status"] == "up"
            )

        _poll(f"port {process.port} rejoins as a replica", rejoined, timeout)
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
                info = _info(replica, "replication")
                if info["role"] != "slave" or int(info["master_port"]) != primary.port:
                    return False
                if info["master_link_status"] != "up":
                    return False
            seen = _online_replica_ports(_info(primary, "replication"))
            return seen >= {p.port for p in running}

        _poll("replicas in sync", in_sync, timeout)

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

            self.data_nodes.append(_start_with_retries(make, self._new_port))

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

            self.sentinels.append(_start_with_retries(make, self._new_port))

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


def cluster_port(taken: set[int]) -> int:
    """A free port for a cluster node whose bus port (+10000) is free too, ≤ 55535."""
    low, high = CLUSTER_PORT_RANGE
    for _ in range(1000):
        port = random.randint(low, high)
        if port in taken or port > MAX_CLUSTER_PORT:
            continue
        if _port_free(port) and _port_free(port + 10000):
            taken.add(port)
            return port
    raise RuntimeError(f"no free cluster port in {CLUSTER_PORT_RANGE}")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


class ClusterNode:
    """One line of CLUSTER NODES."""

    def __init__(self, line: str) -> None:
        fields = line.split()
        self.id = fields[0]
        address = fields[1].split("@")[0].split(",")[0]
        self.port = int(address.rsplit(":", 1)[1])
        self.flags = set(fields[2].split(","))
        self.master_id = fields[3]
        self.link = fields[7]
        self.slots: list[tuple[int, int]] = []
        for spec in fields[8:]:
            if spec.startswith("["):  # a slot being imported or migrated
                continue
            first, _, last = spec.partition("-")
            self.slots.append((int(first), int(last or first)))

    @property
    def is_primary(self) -> bool:
        return "master" in self.flags

    @property
    def failed(self) -> bool:
        return bool(self.flags & {"fail", "fail?", "handshake", "noaddr"})

    def owns(self, slot: int) -> bool:
        return any(first <= slot <= last for first, last in self.slots)


def cluster_nodes(process: RedisProcess) -> list[ClusterNode]:
    """CLUSTER NODES as `process` sees it."""
    with process.client() as client:
        text = client.execute_command("CLUSTER", "NODES")
    if isinstance(text, bytes):
        text = text.decode()
    return [ClusterNode(line) for line in str(text).splitlines() if line.strip()]


class Cluster:
    """`primaries` cluster-mode primaries (slots split evenly), each with
    `replicas_per_primary` replicas, AOF with fsync always. Use as a context manager.
    """

    def __init__(
        self,
        binary: Path,
        workdir: Path,
        *,
        primaries: int = 3,
        replicas_per_primary: int = 0,
        node_timeout_ms: int = 1000,
        extra: dict[str, str] | None = None,
    ) -> None:
        if primaries < 1 or replicas_per_primary < 0:
            raise ValueError("need at least one primary")
        self.binary = binary
        self.workdir = workdir
        self.primary_count = primaries
        self.replicas_per_primary = replicas_per_primary
        self.node_timeout_ms = node_timeout_ms
        self.extra = dict(extra or {})
        """Config lines added to (or overriding) every node's cluster settings."""
        self.nodes: list[RedisProcess] = []
        """The first `primaries` started as primaries, then their replicas in order."""
        self._ports: set[int] = set()
        self._ids: dict[int, str] = {}

    # -- life cycle -------------------------------------------------------------------

    def start(self) -> Cluster:
        """Start, assign slots, meet, replicate; return once every node says cluster ok."""
        try:
            total = self.primary_count * (1 + self.replicas_per_primary)
            for index in range(total):
                self.nodes.append(self._start_node(index))
            for node in self.nodes:
                with node.client() as client:
                    self._ids[node.port] = _text(client.execute_command("CLUSTER", "MYID"))
            self._assign_slots()
            self._meet()
            self._replicate()
            self.wait_ok(SET_START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop replicas first, then primaries (nothing to fail over while stopping)."""
        running = [p for p in self.nodes if is_running(p)]
        masters = [p for p in running if _safe_role(p) == "master"]
        _stop_all([p for p in self.nodes if p not in masters] + masters)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what clients see ---------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"redis+cluster://{HOST}:{self.nodes[0].port}"

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        return [(HOST, p.port) for p in self.nodes]

    def running(self) -> list[RedisProcess]:
        return [p for p in self.nodes if is_running(p)]

    def slot_of(self, key: str | bytes) -> int:
        """CLUSTER KEYSLOT, asked of a running node."""
        with self.running()[0].client() as client:
            return int(client.execute_command("CLUSTER", "KEYSLOT", key))

    def primary_for(self, key: str | bytes) -> RedisProcess:
        """The node that the first running node names as the owner of `key`'s slot."""
        slot = self.slot_of(key)
        return self._owner(slot, self.running()[0])

    def primaries(self) -> list[RedisProcess]:
        """Running nodes that serve slots, as the first running node sees it."""
        view = cluster_nodes(self.running()[0])
        ports = {n.port for n in view if n.is_primary and not n.failed and n.slots}
        return [p for p in self.running() if p.port in ports]

    # -- faults -----------------------------------------------------------------------

    def kill_primary_of(
        self, key: str | bytes, timeout: float = FAILOVER_TIMEOUT_S
    ) -> tuple[RedisProcess, RedisProcess, float]:
        """kill -9 the primary of `key`'s slot; wait until a replica serves the slot.

        Returns (killed node, promoted node, seconds from the kill until every running
        node names the promoted one as the slot's owner and reports cluster_state:ok).
        """
        if self.replicas_per_primary < 1:
            raise ValueError("no replica to promote: build the cluster with replicas_per_primary=1")
        slot = self.slot_of(key)
        old = self.primary_for(key)
        old.kill9()
        killed_at = time.monotonic()

        def promoted() -> RedisProcess | None:
            owners = {_owner_port(slot, node) for node in self.running()}
            if len(owners) != 1 or old.port in owners or None in owners:
                return None
            port = owners.pop()
            assert port is not None
            new = self._by_port(port)
            if _role(new) != "master" or not self._all_ok():
                return None
            return new

        new = _poll(f"a replica takes slot {slot} over from port {old.port}", promoted, timeout)
        return old, new, time.monotonic() - killed_at

    def restart(self, process: RedisProcess, *, timeout: float = REJOIN_TIMEOUT_S) -> RedisProcess:
        """Start a killed node again (its nodes.conf is kept); wait until the cluster is ok
        and a former primary whose slots moved has become a replica."""
        process.restart()

        def rejoined() -> bool:
            if not self._all_ok():
                return False
            views = [
                next(n for n in cluster_nodes(other) if n.port == process.port)
                for other in self.running()
                if other is not process
            ]
            if any(view.failed for view in views):
                return False
            info = _info(process, "replication")
            role, link = str(info["role"]), str(info.get("master_link_status"))
            if all(view.is_primary and view.slots for view in views):
                return role == "master"
            return role == "slave" and link == "up"

        _poll(f"port {process.port} rejoins the cluster", rejoined, timeout)
        return process

    def wait_ok(self, timeout: float = SET_START_TIMEOUT_S) -> None:
        """Until every running node reports cluster_state:ok with all slots served."""
        _poll("cluster_state:ok on every node", self._all_ok, timeout)

    # -- internals --------------------------------------------------------------------

    def _start_node(self, index: int) -> RedisProcess:
        workdir = self.workdir / f"node{index}"
        extra = {
            "cluster-enabled": "yes",
            "cluster-config-file": "nodes.conf",
            "cluster-node-timeout": str(self.node_timeout_ms),
            # Replicas may always stand for election, whatever their link's age.
            "cluster-replica-validity-factor": "0",
            **DATA_NODE_DEFAULTS,
            **self.extra,
        }

        def make(port: int) -> RedisProcess:
            return RedisProcess(self.binary, workdir, port=port, appendfsync="always", extra=extra)

        return _start_with_retries(make, lambda: cluster_port(self._ports))

    def _assign_slots(self) -> None:
        per = CLUSTER_SLOTS // self.primary_count
        for index, node in enumerate(self.nodes[: self.primary_count]):
            first = index * per
            last = CLUSTER_SLOTS - 1 if index == self.primary_count - 1 else first + per - 1
            with node.client() as client:
                # Distinct epochs up front, as redis-cli --cluster create does.
                client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", index + 1)
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)

    def _meet(self) -> None:
        first = self.nodes[0]
        with first.client() as client:
            for node in self.nodes[1:]:
                client.execute_command("CLUSTER", "MEET", HOST, node.port)

        def all_known() -> bool:
            for node in self.nodes:
                view = cluster_nodes(node)
                connected = [n for n in view if n.link == "connected" or "myself" in n.flags]
                if len(connected) != len(self.nodes) or any("handshake" in n.flags for n in view):
                    return False
            return True

        _poll("every node knows every other", all_known, SET_START_TIMEOUT_S)

    def _replicate(self) -> None:
        for index, node in enumerate(self.nodes[self.primary_count :]):
            primary = self.nodes[index % self.primary_count]
            with node.client() as client:
                client.execute_command("CLUSTER", "REPLICATE", self._ids[primary.port])

        def linked() -> bool:
            for node in self.nodes[self.primary_count :]:
                if _info(node, "replication").get("master_link_status") != "up":
                    return False
            return True

        _poll("replicas linked to their primaries", linked, SET_START_TIMEOUT_S)

    def _all_ok(self) -> bool:
        for node in self.running():
            info = _cluster_info(node)
            if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != str(
                CLUSTER_SLOTS
            ):
                return False
        return True

    def _owner(self, slot: int, asked: RedisProcess) -> RedisProcess:
        port = _owner_port(slot, asked)
        if port is None:
            raise RuntimeError(f"port {asked.port} names no live owner of slot {slot}")
        return self._by_port(port)

    def _by_port(self, port: int) -> RedisProcess:
        for process in self.nodes:
            if process.port == port:
                return process
        raise RuntimeError(f"port {port} is not a node of this cluster")


def _owner_port(slot: int, asked: RedisProcess) -> int | None:
    """The port of the live primary that `asked` names as the owner of `slot`."""
    for node in cluster_nodes(asked):
        if node.is_primary and not node.failed and node.owns(slot):
            return node.port
    return None


def _cluster_info(process: RedisProcess) -> dict[str, str]:
    with process.client() as client:
        text = _text(client.execute_command("CLUSTER", "INFO"))
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


__all__ = [
    "Cluster",
    "ClusterNode",
    "SentinelSet",
    "cluster_nodes",
    "cluster_port",
    "is_running",
]
