"""Print the slowest tests of several pytest runs, from their JUnit XML reports.

    python scripts/slowest.py 20 valkey=a.xml memory=b.xml ...

A test's time is its setup, call and teardown together (as `--durations` counts
them), measured in whichever worker ran it.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def timings(name: str, report: Path) -> list[tuple[float, str, str]]:
    """(seconds, pass name, test id) of every test case in `report`."""
    if not report.exists():
        return []  # the pass did not get as far as writing it
    cases = ET.parse(report).getroot().iter("testcase")
    return [(float(case.get("time", 0)), name, _test_id(case)) for case in cases]


def _test_id(case: ET.Element) -> str:
    """`tests/test_x.py::test_y[param]` from JUnit's classname `tests.test_x` and name."""
    module = case.get("classname", "").replace(".", "/")
    return f"{module}.py::{case.get('name')}"


def main(argv: list[str]) -> None:
    count, *runs = argv
    found: list[tuple[float, str, str]] = []
    for run in runs:
        name, _, path = run.partition("=")
        found += timings(name, Path(path))
    for seconds, name, test in sorted(found, reverse=True)[: int(count)]:
        print(f"  {seconds:6.1f} s  {name:<7} {test}")


if __name__ == "__main__":
    main(sys.argv[1:])
