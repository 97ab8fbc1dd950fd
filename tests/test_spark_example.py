"""The Spark example pipeline runs as a user runs it: its own Spark driver, a real server."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SERVER_KIND

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "spark_pipeline.py"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(SERVER_KIND != "valkey", reason="Spark tests run in the valkey pass only"),
]


def expected_totals(count: int) -> list[str]:
    """What the example should print, from the example's own order generator."""
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    totals: dict[str, tuple[int, float]] = {}
    for i in range(count):
        o = example.order(i)
        n, amount = totals.get(o["region"], (0, 0.0))
        totals[o["region"]] = (n + 1, amount + o["qty"] * o["price"])
    return [f"{r}: {n} orders, amount {round(a, 2)}" for r, (n, a) in sorted(totals.items())]


def test_spark_pipeline_example_prints_the_total_of_each_region(
    server_url: str, namespace: str, tmp_path: Path
) -> None:
    pytest.importorskip("pyspark", reason="pyspark is not installed (the spark extra)")
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.skip("Spark needs Java 17 (apt-get install openjdk-17-jre-headless)")
    env = {**os.environ, "DURABLES_NAMESPACE": namespace}
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--url",
            server_url,
            "--count",
            "90",
            "--checkpoint",
            str(tmp_path / "ck"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "published 90 orders"
    assert lines[1:] == expected_totals(90)
