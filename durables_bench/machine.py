"""Facts about this run's machine and software, printed above the results."""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import redis
from redis.utils import HIREDIS_AVAILABLE

import durables

Facts = dict[str, str | int | bool | None]


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _proc_field(path: str, name: str) -> str | None:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return None


def _memory_gib() -> float | None:
    total = _proc_field("/proc/meminfo", "MemTotal")  # "24684096 kB"
    return round(int(total.split()[0]) / 2**20, 1) if total else None


def facts(valkey: str, nats_server: str | None) -> Facts:
    """Server versions, Python and client libraries, and the machine."""
    memory = _memory_gib()
    return {
        "durables": durables.__version__,
        "valkey": valkey,
        "nats_server": nats_server,
        "python": platform.python_version(),
        "redis_py": redis.__version__,
        "hiredis": HIREDIS_AVAILABLE,
        "nats_py": _version("nats-py"),
        "cpus": os.cpu_count(),
        "cpu": _proc_field("/proc/cpuinfo", "model name") or platform.processor() or None,
        "memory_gib": str(memory) if memory is not None else None,
        "machine": platform.platform(),
    }
