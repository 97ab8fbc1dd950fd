"""What a server process durables starts is given: its config, a free port, and the tail
of its log when it fails (the embedded server; the test fixtures' replicas, sentinels and
clusters too)."""

from __future__ import annotations

import socket
from pathlib import Path

HOST = "127.0.0.1"
LOG_TAIL_LINES = 20


def server_config(
    port: int, data_dir: Path, log_path: Path, fsync: str, extra: dict[str, str] | None = None
) -> str:
    """The config durables runs a server with: loopback only, AOF on, no RDB snapshots.

    `extra` lines are written verbatim after the defaults (a value may hold several
    arguments), which the test fixtures use for replicas, sentinels and clusters.
    """
    settings = {
        "bind": HOST,
        "port": str(port),
        "protected-mode": "yes",
        "daemonize": "no",
        "dir": _quote(str(data_dir)),
        "logfile": _quote(str(log_path)),
        "appendonly": "yes",
        "appendfsync": fsync,
        "save": '""',
        **(extra or {}),
    }
    return "".join(f"{key} {value}\n" for key, value in settings.items())


def _quote(value: str) -> str:
    """Quote a config argument the way valkey's sdssplitargs reads it."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def log_tail(log: Path, offset: int, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` the server logged since `offset`."""
    try:
        with open(log, "rb") as file:
            file.seek(offset)
            text = file.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


__all__ = ["HOST", "free_port", "log_tail", "server_config"]
