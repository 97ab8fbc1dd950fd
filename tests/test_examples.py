"""The examples and the demo run as a user would run them, against a real server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import durables
from durables import demo

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
    assert demo.run(server_url, namespace) == 0


def test_readme_demo_command_starts_the_embedded_server_and_finishes(tmp_path: Path) -> None:
    """`./scripts/demo` as the README gives it, with a home of its own (then stopped)."""
    from durables.server import EmbeddedServer

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
    code = readme.split("## Quick start", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    env = {**os.environ, "DURABLES_URL": server_url, "DURABLES_NAMESPACE": namespace}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    first, depths = done.stdout.splitlines()[:2]
    assert first.endswith("o-1 {'id': 1, 'qty': 3} False")
    assert depths == "0 0"


def test_asyncio_service_example_processes_every_order_once_in_order(
    server_url: str, namespace: str
) -> None:
    lines = run_example("asyncio_service.py", server_url, namespace, "--count", "15")
    assert lines[:-1] == [f"processed order-{i} qty={i % 7}" for i in range(15)]
    assert lines[-1] == "processed 15 orders; depth now 0"
