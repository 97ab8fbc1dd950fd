"""Two benchmark reports side by side: was any path slower after a change?

Each scenario is compared by the figure that the same run normalises: durables' ratio
to the raw redis-py program measured in the same run (throughput), its p50 latency
over raw's p50 (latency), bytes over raw's bytes (memory), or microseconds per fetch
(fetch_cost). Ratios cancel most of the machine's noise between two runs.

    python -m durables_bench.compare before.json after.json [--tolerance 0.1]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


@dataclass(frozen=True)
class Change:
    """One scenario's figure before and after; `better` says which way is good."""

    name: str
    figure: str
    before: float
    after: float
    higher_is_better: bool

    @property
    def gain(self) -> float:
        """after / before as an improvement factor (> 1: better)."""
        if self.higher_is_better:
            return self.after / self.before
        return self.before / self.after


def figure(row: dict[str, Any]) -> tuple[str, float, bool] | None:
    """(what, value, higher is better) for a scenario row; None if it has nothing to compare."""
    if row.get("table") == "latency" and row.get("p50_ms") and row.get("raw_p50_ms"):
        return "p50 / raw p50", float(row["p50_ms"]) / float(row["raw_p50_ms"]), False
    if row.get("ratio_bytes_raw"):
        return "bytes / raw", float(row["ratio_bytes_raw"]), False
    if row.get("durables_us_per_fetch"):
        return "µs per fetch", float(row["durables_us_per_fetch"]), False
    if row.get("ratio_raw"):
        return "x raw", float(row["ratio_raw"]), True
    return None


def rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in report["scenarios"]}


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    old, new = rows(before), rows(after)
    found = []
    for name, row in new.items():
        if name not in old:
            continue
        a, b = figure(old[name]), figure(row)
        if a is None or b is None or a[1] == 0 or b[1] == 0:
            continue
        found.append(Change(name, b[0], a[1], b[1], b[2]))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument(
        "--tolerance",
        type=float,
        default=0.1,
        help="a gain below 1 - tolerance counts as slower [0.1]",
    )
    args = parser.parse_args(argv)
    found = changes(json.loads(args.before.read_text()), json.loads(args.after.read_text()))
    table = Table(title="durables before → after (ratios from the same run)")
    for column in ("scenario", "figure", "before", "after", "gain", "verdict"):
        table.add_column(column)
    slower = []
    for c in found:
        verdict = "slower" if c.gain < 1 - args.tolerance else "ok"
        if verdict == "slower":
            slower.append(c.name)
        table.add_row(
            c.name, c.figure, f"{c.before:.2f}", f"{c.after:.2f}", f"{c.gain:.2f}x", verdict
        )
    Console().print(table)
    if slower:
        print(f"slower than before beyond {args.tolerance:.0%}: {', '.join(slower)}")
    return 1 if slower else 0


if __name__ == "__main__":
    sys.exit(main())
