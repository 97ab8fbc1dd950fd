"""A Redis Cluster for tests: cluster-mode primaries (and a replica each if asked),
built from `RedisProcess`.

Every process is a child of the test process on 127.0.0.1, every wait is bounded, and
`stop()` leaves nothing behind. A node restarts with the nodes.conf it left behind.
"""

from __future__ import annotations

import random
import socket
import time
from pathlib import Path
from typing import Self

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
from .servers import HOST, RedisProcess, Started, quick_client

CLUSTER_SLOTS = 16384
MAX_CLUSTER_PORT = 55535
"""Cluster mode refuses higher ports: the bus port is port + 10000."""
CLUSTER_PORT_RANGE = (20000, 22700)
"""Cluster ports are drawn from here, so that they and their bus ports (30000-32700)
stay below MAX_CLUSTER_PORT and below Linux's ephemeral range (32768 up)."""


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


ADMIN_TIMEOUT_S = 10.0
"""What a cluster command that rewrites nodes.conf (fsynced) may take on a machine busy with
parallel test workers: a second is not always enough there, and the setup is not under test."""


def admin(process: RedisProcess) -> redis.Redis:
    """A client for the harness's own cluster commands (slots, meet, replicate, migrate)."""
    return quick_client(process.port, timeout_s=ADMIN_TIMEOUT_S)


def cluster_nodes(process: RedisProcess) -> list[ClusterNode]:
    """CLUSTER NODES as `process` sees it."""
    with process.client() as client:
        text = client.execute_command("CLUSTER", "NODES")
    if isinstance(text, bytes):
        text = text.decode()
    return [ClusterNode(line) for line in str(text).splitlines() if line.strip()]


class Cluster(Started):
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

    def start(self) -> Self:
        """Start, assign slots, meet, replicate; return once every node says cluster ok."""
        try:
            total = self.primary_count * (1 + self.replicas_per_primary)
            for index in range(total):
                self.nodes.append(self._start_node(index))
            for node in self.nodes:
                with admin(node) as client:
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
        masters = [p for p in running if safe_role(p) == "master"]
        stop_all([p for p in self.nodes if p not in masters] + masters)

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
            if role_of(new) != "master" or not self._all_ok():
                return None
            return new

        new = poll(f"a replica takes slot {slot} over from port {old.port}", promoted, timeout)
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
            info = info_of(process, "replication")
            role, link = str(info["role"]), str(info.get("master_link_status"))
            if all(view.is_primary and view.slots for view in views):
                return role == "master"
            return role == "slave" and link == "up"

        poll(f"port {process.port} rejoins the cluster", rejoined, timeout)
        return process

    def migrate_slot(
        self,
        slot: int,
        to: RedisProcess,
        *,
        pause_s: float = 0.5,
        slow_for_s: float = 20.0,
        timeout: float = REJOIN_TIMEOUT_S,
    ) -> int:
        """Move `slot` to the primary `to` as an operator resharding by hand does: IMPORTING
        on `to`, MIGRATING on the owner, then one key per `MIGRATE`, `pause_s` apart (so the
        slot's keys are split between the two for seconds), for at most `slow_for_s`; the
        rest in one go; then the slot assigned to `to` on every node. Returns the keys moved."""
        source = self._owner(slot, self.running()[0])
        if source is to:
            raise ValueError(f"port {to.port} already serves slot {slot}")
        with admin(to) as target, admin(source) as owner:
            target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", self._ids[source.port])
            owner.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", self._ids[to.port])
            moved = 0
            slow_until = time.monotonic() + slow_for_s
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                slow = time.monotonic() < slow_until
                keys = owner.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1 if slow else 1000)
                if not keys:
                    break
                owner.execute_command("MIGRATE", HOST, to.port, "", 0, 5000, "KEYS", *keys)
                moved += len(keys)
                if slow:
                    time.sleep(pause_s)
            else:
                raise TimeoutError(f"slot {slot} still has keys on port {source.port}")
            others = [p for p in self.primaries() if p is not to and p is not source]
            for node in (to, source, *others):
                with admin(node) as client:
                    client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", self._ids[to.port])
        poll(
            f"every node names port {to.port} as the owner of slot {slot}",
            lambda: all(_owner_port(slot, node) == to.port for node in self.running()),
            timeout,
        )
        return moved

    def wait_ok(self, timeout: float = SET_START_TIMEOUT_S) -> None:
        """Until every running node reports cluster_state:ok with all slots served."""
        poll("cluster_state:ok on every node", self._all_ok, timeout)

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

        return start_with_retries(make, lambda: cluster_port(self._ports))

    def _assign_slots(self) -> None:
        per = CLUSTER_SLOTS // self.primary_count
        for index, node in enumerate(self.nodes[: self.primary_count]):
            first = index * per
            last = CLUSTER_SLOTS - 1 if index == self.primary_count - 1 else first + per - 1
            with admin(node) as client:
                # Distinct epochs up front, as redis-cli --cluster create does.
                client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", index + 1)
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)

    def _meet(self) -> None:
        first = self.nodes[0]
        with admin(first) as client:
            for node in self.nodes[1:]:
                client.execute_command("CLUSTER", "MEET", HOST, node.port)

        def all_known() -> bool:
            for node in self.nodes:
                view = cluster_nodes(node)
                connected = [n for n in view if n.link == "connected" or "myself" in n.flags]
                if len(connected) != len(self.nodes) or any("handshake" in n.flags for n in view):
                    return False
            return True

        poll("every node knows every other", all_known, SET_START_TIMEOUT_S)

    def _replicate(self) -> None:
        for index, node in enumerate(self.nodes[self.primary_count :]):
            primary = self.nodes[index % self.primary_count]
            with admin(node) as client:
                client.execute_command("CLUSTER", "REPLICATE", self._ids[primary.port])

        def linked() -> bool:
            for node in self.nodes[self.primary_count :]:
                if info_of(node, "replication").get("master_link_status") != "up":
                    return False
            return True

        poll("replicas linked to their primaries", linked, SET_START_TIMEOUT_S)

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


__all__ = ["Cluster", "ClusterNode", "cluster_nodes", "cluster_port"]
