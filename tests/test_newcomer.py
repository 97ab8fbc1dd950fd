"""A newcomer's first hour, as a test: the quick start, then every example, then every
runnable block of the README and the docs, all in one fresh namespace on one embedded
server (no URL anywhere), in that order; then all of it again, shuffled, in another.

Nothing may collide with what ran before it (a durable of the same name and another kind,
a session still held): each step is a separate process, as a reader would run it.
`examples/spark_pipeline.py` is left out (it needs the spark extra and a JVM; its own
test runs it).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from durables.server.embedded import EmbeddedServer

from .test_docs import BLOCKS, ROOT

EXAMPLES = ROOT / "examples"
EXAMPLE_ARGS: dict[str, list[str]] = {
    "producer.py": [],
    "exclusive_consumer.py": ["--idle", "1"],
    "shared_workers.py": [],
    "serial_pair.py": [],
    "session_cache.py": [],
    "asyncio_service.py": [],
    "reconnecting_session.py": ["--idle", "1"],
}
"""Every example but Spark's, with what makes it end on its own when nothing else runs."""


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]


def quick_start() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("## Quick start", 1)[1].split("```python run\n", 1)[1].split("```", 1)[0]


def steps() -> list[Step]:
    examples = sorted(path.name for path in EXAMPLES.glob("*.py") if "spark" not in path.name)
    assert examples == sorted(EXAMPLE_ARGS), "a new example: say how it ends on its own"
    return [
        Step("README quick start", [sys.executable, "-c", quick_start()]),
        *(
            Step(f"examples/{name}", [sys.executable, str(EXAMPLES / name), *EXAMPLE_ARGS[name]])
            for name in examples
        ),
        *(Step(at, [sys.executable, "-c", code]) for at, code in BLOCKS),
    ]


def run_all(order: list[Step], env: dict[str, str], cwd: Path) -> list[str]:
    """Each step in turn; what failed, with the end of what it said."""
    failed = []
    for step in order:
        try:
            done = subprocess.run(
                step.argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120
            )
        except subprocess.TimeoutExpired:
            failed.append(f"{step.name}: did not end within 120 s")
            continue
        if done.returncode != 0:
            tail = "\n    ".join(done.stderr.strip().splitlines()[-3:])
            failed.append(f"{step.name} (exit {done.returncode}):\n    {tail}")
    return failed


@pytest.fixture
def newcomer(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a reader with no server of their own: the embedded one, in a home
    of the test's own (stopped at the end)."""
    home = tmp_path / "home"
    env = {key: value for key, value in os.environ.items() if not key.startswith("DURABLES_")}
    env |= {"DURABLES_HOME": str(home), "DURABLES_BLOCK_S": "0.2"}
    yield env
    EmbeddedServer(home).stop()


@pytest.mark.slow
def test_the_quick_start_every_example_and_every_block_run_in_one_namespace_in_any_order(
    newcomer: dict[str, str], tmp_path: Path
) -> None:
    everything = steps()
    in_order = run_all(everything, newcomer, tmp_path)  # the default namespace, fresh
    seed = random.randrange(1 << 30)
    shuffled = random.Random(seed).sample(everything, len(everything))
    again = run_all(
        shuffled, newcomer | {"DURABLES_NAMESPACE": f"s{uuid.uuid4().hex[:8]}"}, tmp_path
    )

    assert in_order == []
    assert again == [], f"shuffled with seed {seed}: {[step.name for step in shuffled]}"
