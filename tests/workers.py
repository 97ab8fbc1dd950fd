"""Running the suite in parallel workers: `pytest -n N --dist loadgroup` (pytest-xdist).

Each worker is its own pytest process with its own temporary directory, so what
conftest.py starts once per session (the server, the cluster, the certificates, the
embedded server's home) is once per worker, on free ports of its own, and tests keep
apart by namespace there as before. What is heavier than a server is shared within one
worker instead: the modules of `TOGETHER` run whole in one worker each (the Spark ones
all in the same), so their session- or module-scoped fixture starts once.

The groups are given here by module rather than by `xdist_group` marks: pytest-xdist's
own `loadgroup` finds a mark's group in the test's node id, which it rewrites, and
pytest 9.2 no longer lets a plugin rewrite node ids (pytest-dev/pytest-xdist#1386), so
under `--dist loadgroup` the scheduler is `GroupedScheduling` below, which reads
`TOGETHER`. Every collection checks that a module whose tests share such a fixture is
listed, so a new one cannot silently start it in every worker.
"""

from __future__ import annotations

from typing import Any

import pytest

SPARK = "spark"
TOGETHER = {
    "test_spark_batch.py": SPARK,
    "test_spark_options.py": SPARK,
    "test_spark_pipeline.py": SPARK,
    "test_spark_reads.py": SPARK,
    "test_bench.py": "test_bench.py",
    "test_bench_instructions.py": "test_bench.py",
    "test_cluster_reshard.py": "test_cluster_reshard.py",
    "test_console.py": "test_console.py",
    "test_replicated_reads.py": "test_replicated_reads.py",
    "test_secrets.py": "test_secrets.py",
}
"""Module -> the group of tests that runs in one worker. Spark: one `local[2]`
SparkSession (~6 s to start, ~1.7 GB) serves every Spark test. The others share a
module-scoped fixture: the benchmark's report (a whole `--quick` run), a browser, a
cluster or a Sentinel set of their own, a password-guarded server. The instruction
counter runs beside the benchmark's report, not at the same time as it: both load the
machine, and the counter's repeat check suffers most from a busy neighbour."""
SHARED_FIXTURES = {SPARK: "session"}
"""Fixtures, beside module-scoped ones, that make a module belong in `TOGETHER`."""


def _shares_a_fixture(item: pytest.Item) -> str | None:
    """The fixture `item` shares with other tests beyond a server, or None."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name, definitions in info.name2fixturedefs.items():
        if name in SHARED_FIXTURES or any(d.scope == "module" for d in definitions):
            return str(name)
    return None


def check_together(items: list[pytest.Item]) -> None:
    """Refuse a collection where a module that shares a fixture is missing from TOGETHER."""
    for item in items:
        if item.path.name in TOGETHER:
            continue
        shared = _shares_a_fixture(item)
        if shared is not None:
            raise pytest.UsageError(
                f"{item.nodeid} shares the fixture {shared!r} with other tests: add "
                f"{item.path.name!r} to TOGETHER in tests/workers.py, so that parallel "
                "workers run it in one worker and start the fixture once"
            )


def slow_first(items: list[pytest.Item]) -> None:
    """Put the tests marked `slow` first, so a worker does not take a long one last
    while the others have nothing left to do (the order tests run in is no contract)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def group_of(nodeid: str) -> str | None:
    """The group of the test `nodeid` from TOGETHER, or None when any worker may run it."""
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return TOGETHER.get(module)


def _scheduling() -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class GroupedScheduling(LoadScopeScheduling):  # type: ignore[misc]  # untyped xdist
        """Each test on the next free worker, but a `TOGETHER` group all on one
        (xdist hands out the largest units first)."""

        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or nodeid

    return GroupedScheduling


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`: GroupedScheduling (see the module); other modes: xdist's."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return _scheduling()(config, log)
