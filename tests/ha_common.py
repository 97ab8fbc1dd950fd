"""What the highly available server sets for tests share (`ha_sentinel.SentinelSet`,
`ha_cluster.Cluster`): bounded polling, starting a `RedisProcess` on a port that may be
taken meanwhile, reading INFO, and stopping a set so that nothing is left behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis

from .servers import RedisProcess

T = TypeVar("T")

POLL_S = 0.05
SET_START_TIMEOUT_S = 30.0
FAILOVER_TIMEOUT_S = 20.0
REJOIN_TIMEOUT_S = 40.0
_START_ATTEMPTS = 3
DATA_NODE_DEFAULTS = {
    # A new replica gets its copy at once instead of after the default 5 s.
    "repl-diskless-sync-delay": "0",
    # SIGTERM of a primary exits at once instead of waiting up to 10 s for lagging
    # replicas (Redis 7), which keeps teardown short; pass extra= to restore it.
    "shutdown-timeout": "0",
}


def poll(what: str, check: Callable[[], T | None], timeout_s: float) -> T:
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


def start_with_retries(
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


def info_of(process: RedisProcess, section: str) -> dict[str, Any]:
    with process.client() as client:
        info: dict[str, Any] = client.info(section)
        return info


def role_of(process: RedisProcess) -> str:
    """`master` or `slave`, from INFO replication (ROLE's reply differs between servers)."""
    return str(info_of(process, "replication")["role"])


def is_running(process: RedisProcess) -> bool:
    """Whether `process` was started and not stopped or killed since."""
    try:
        return process.pid > 0  # `pid` raises RuntimeError when not running
    except RuntimeError:
        return False


def safe_role(process: RedisProcess) -> str | None:
    try:
        return role_of(process)
    except (redis.RedisError, OSError):
        return None


def stop_all(processes: list[RedisProcess]) -> None:
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


__all__ = [
    "DATA_NODE_DEFAULTS",
    "FAILOVER_TIMEOUT_S",
    "POLL_S",
    "REJOIN_TIMEOUT_S",
    "SET_START_TIMEOUT_S",
    "info_of",
    "is_running",
    "poll",
    "role_of",
    "safe_role",
    "start_with_retries",
    "stop_all",
]
