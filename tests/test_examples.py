"""The examples and the demo run as a user would run them, against a real server."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import durables

from .cli_support import tour
from .conftest import FAST
from .faultproxy import FaultProxy
from .helpers import wait_for
from .servers import RedisProcess

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, url: str, namespace: str, *args: str) -> list[str]:
    env = {**os.environ, "DURABLES_NAMESPACE": namespace}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--url", url, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


def test_producer_and_exclusive_consumer_examples_hand_over_every_event(
    server_url: str, namespace: str, client: durables.Client
) -> None:
    client.channel("orders").durable("billing")
    ids = run_example("producer.py", server_url, namespace, "--count", "12")
    assert len(ids) == 12
    lines = run_example(
        "exclusive_consumer.py", server_url, namespace, "--count", "12", "--idle", "1"
    )
    assert [line.split()[0] for line in lines[:-1]] == ids
    assert lines[-1] == "received 12 events; depth now 0"


def test_demo_runs_to_its_happy_end(server_url: str, namespace: str) -> None:
    assert tour.run(server_url, namespace) == 0


def test_the_demo_on_the_embedded_server_says_it_keeps_running_and_how_to_stop_it(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DURABLES_HOME", str(home))
    monkeypatch.delenv("DURABLES_URL", raising=False)
    assert tour.run(None, "demo", events=4) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "keeps running in the background" in out and "durables server stop" in out


def test_readme_demo_command_starts_the_embedded_server_and_finishes(tmp_path: Path) -> None:
    """`./scripts/demo` as the README gives it, with a home of its own (then stopped)."""
    from durables.server.embedded import EmbeddedServer

    home = tmp_path / "home"
    env = {**os.environ, "DURABLES_HOME": str(home)}
    env.pop("DURABLES_URL", None)
    try:
        done = subprocess.run(
            ["bash", str(EXAMPLES.parent / "scripts" / "demo")],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "demo finished" in done.stdout
        assert EmbeddedServer(home).status().running
    finally:
        EmbeddedServer(home).stop()


def test_readme_quick_start_runs(server_url: str, namespace: str) -> None:
    readme = (EXAMPLES.parent / "README.md").read_text()
    code = readme.split("## Quick start", 1)[1].split("```python run\n", 1)[1].split("```", 1)[0]
    env = {**os.environ, "DURABLES_URL": server_url, "DURABLES_NAMESPACE": namespace}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    first, depths = done.stdout.splitlines()[:2]
    assert first.endswith("o-1 {'id': 1, 'qty': 3} False")
    assert depths == "0 0"


def test_shared_workers_example_deals_jobs_round_robin_to_worker_processes(
    server_url: str, namespace: str
) -> None:
    lines = run_example("shared_workers.py", server_url, namespace, "--workers", "2")
    did = sorted(line for line in lines if " did job " in line)
    assert did == sorted(
        [f"worker-1 did job {n}" for n in (1, 3, 5, 7, 9)]
        + [f"worker-2 did job {n}" for n in (2, 4, 6, 8, 10)]
    )
    assert lines[-2:] == ["worker-1 took jobs 1 3 5 7 9", "worker-2 took jobs 2 4 6 8 10"]


def test_serial_pair_example_passes_the_line_between_its_consumers_in_publish_order(
    server_url: str, namespace: str
) -> None:
    lines = run_example("serial_pair.py", server_url, namespace, "--steps", "8")
    assert lines[:-1] == [
        f"{name} posted step {step} ({other} was given 0)"
        for step, (name, other) in enumerate([("left", "right"), ("right", "left")] * 4, 1)
    ]
    assert lines[-1] == "8 steps posted, in publish order: yes"


def test_exclusive_consumer_example_acknowledges_only_the_events_it_printed(
    server_url: str, namespace: str
) -> None:
    ids = run_example("producer.py", server_url, namespace, "--count", "10")
    first = run_example("exclusive_consumer.py", server_url, namespace, "--count", "3")
    rest = run_example("exclusive_consumer.py", server_url, namespace, "--idle", "1")

    assert [line.split()[0] for line in first[:-1]] == ids[:3]
    assert first[-1] == "received 3 events; depth now 7"
    assert [line.split()[0] for line in rest[:-1]] == ids[3:]
    assert rest[-1] == "received 7 events; depth now 0"


def test_session_cache_example_replays_without_touching_the_cache_then_goes_live(
    server_url: str, namespace: str
) -> None:
    lines = run_example("session_cache.py", server_url, namespace)
    assert lines == [
        "opened desk-7 (resumed: False)",
        "while away: AAPL 101.5, AAPL 102.0, MSFT 310.0",
        "back as desk-7 (resumed: True)",
        "replayed AAPL 101.5 (cache: 102.5)",
        "replayed AAPL 102.0 (cache: 102.5)",
        "replayed MSFT 310.0 (cache: None)",
        "prices is live",
        "live AAPL 103.0 (cache: 103.0)",
        "cache now: {'AAPL': '103.0'}",
    ]


class Lines:
    """A running example's stdout, line by line, read on a thread of its own."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def join(self) -> None:
        """Wait for the end of the output (the process has ended)."""
        self._thread.join(10)

    def snapshot(self) -> list[str]:
        with self._lock:
            return list(self.lines)

    def events(self) -> list[str]:
        return [line.split()[1] for line in self.snapshot() if line.startswith("event ")]

    def wait_for(self, predicate: Callable[[list[str]], bool], timeout: float = 30) -> None:
        if not wait_for(lambda: predicate(self.snapshot()), timeout):
            raise AssertionError(f"gave up waiting; output so far: {self.snapshot()}")


def test_reconnecting_session_example_rides_through_a_dropped_and_a_black_holed_connection(
    server: RedisProcess, namespace: str
) -> None:
    env = {
        **os.environ,
        "DURABLES_NAMESPACE": namespace,
        "DURABLES_LEASE_TIMEOUT_S": "1",
        "DURABLES_BLOCK_S": "0.2",
        "DURABLES_HOUSEKEEP_INTERVAL_S": "3600",
    }
    published: list[str] = []
    with (
        FaultProxy(server.port) as proxy,
        durables.connect(server.url, namespace=namespace, **FAST) as producer,
    ):
        env["DURABLES_URL"] = proxy.url  # the example reads the URL from the environment too
        orders = producer.channel("orders")
        with subprocess.Popen(
            [sys.executable, str(EXAMPLES / "reconnecting_session.py"), "--count", "80"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        ) as example:
            out = Lines(example)
            try:
                out.wait_for(lambda lines: "ready" in lines)

                def publish(n: int) -> None:
                    start = len(published)
                    published.extend(orders.publish(f"o{i}") for i in range(start, start + n))

                def delivered_all() -> None:
                    out.wait_for(lambda _: out.events() == published)

                publish(20)
                delivered_all()
                proxy.kill()  # every connection reset, new ones refused
                publish(20)  # while it is away
                out.wait_for(lambda lines: "session: connected -> disconnected" in lines)
                proxy.restart()
                publish(20)
                delivered_all()
                proxy.blackhole()  # bytes dropped, nothing closed
                publish(10)
                out.wait_for(lambda lines: lines.count("session: connected -> disconnected") == 2)
                proxy.blackhole(False)
                publish(10)
                assert example.wait(60) == 0
            finally:
                if example.poll() is None:
                    example.kill()
                    example.wait()
                out.join()
    lines = out.snapshot()
    print("\n".join(line for line in lines if not line.startswith("event ")))
    assert out.events() == published  # every event once, in order
    assert lines[-3:] == [
        "received 80 events, 0 duplicates",
        "session: connected -> closed",
        "server: connected -> closed",
    ]
    assert lines.count("session: disconnected -> connected") == 2
    assert "session: disconnected -> expired" not in lines


def test_asyncio_service_example_processes_every_order_once_in_order(
    server_url: str, namespace: str
) -> None:
    lines = run_example("asyncio_service.py", server_url, namespace, "--count", "15")
    assert lines[:-1] == [f"processed order-{i} qty={i % 7}" for i in range(15)]
    assert lines[-1] == "processed 15 orders; depth now 0"
