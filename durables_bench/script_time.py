"""Which script the server's time goes to: per event, each command's and each script's
server time on a path of the budget (`durables_bench.budget`), scripts by name.

The budget's `INFO commandstats` counts every script call under one `evalsha`; this logs
every command the server runs (`SLOWLOG` at 0 µs) while the path's measured step runs, and
adds up their durations by command, a script by the name its SHA1 stands for
(`durables.scripts`). A script's time includes its own calls, which are also listed under
their names. Durations are the server's wall time inside each command: read them on a quiet
host, and compare medians of a few rounds (`--rounds`, 3 by default): a row moves by a
tenth from run to run. Run it with
`python -m durables_bench.script_time --only handoff_shared [--events N] [--rounds R]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from durables import scripts

from . import budget
from .env import at_least_one
from .servers import ValkeyServer

LOG_LENGTH = 2_000_000
"""Enough entries for every command of a path's step (about 30 a hand-off)."""


@dataclass
class Share:
    name: str
    """A command, or `script <name>` for a script call."""
    calls: float
    """Calls per event."""
    us: float
    """Server microseconds per event."""


def script_names() -> dict[str, str]:
    """SHA1 -> name of every script of the library."""
    return {scripts.sha(n): n for n in scripts.NAMES}


def shares(log: list[dict[str, Any]], events: int, names: dict[str, str]) -> list[Share]:
    """`SLOWLOG GET`'s entries added up per command (a script by its name), per event, the
    most time first."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0])
    for entry in log:
        args = entry["command"].split()
        name = args[0].decode().lower()
        if name in ("evalsha", "eval") and len(args) > 1:
            sha = args[1].decode()
            name = f"script {names.get(sha, sha[:8])}"
        if name in ("slowlog", "config"):
            continue
        totals[name][0] += 1
        totals[name][1] += entry["duration"]
    rows = [Share(n, c / events, us / events) for n, (c, us) in totals.items()]
    return sorted(rows, key=lambda s: -s.us)


def measure(bench: budget.Bench, path: str, events: int) -> list[Share]:
    steps = budget.PATHS[path][0](bench, events)
    step = next(steps)  # set up, warmed
    raw = bench.raw
    raw.config_set("slowlog-max-len", LOG_LENGTH)
    raw.slowlog_reset()
    raw.config_set("slowlog-log-slower-than", 0)
    try:
        step()
    finally:
        raw.config_set("slowlog-log-slower-than", 10_000)
        steps.close()
    log = raw.slowlog_get(LOG_LENGTH)
    raw.slowlog_reset()
    return shares(log, events, script_names())


def run(path: str, events: int, rounds: int = 1) -> list[Share]:
    """`rounds` runs of the path on one server (flushed between them); each row's median
    (a row missing from a round counts as 0 there)."""
    with tempfile.TemporaryDirectory() as work, ValkeyServer(Path(work)) as server:
        url = ValkeyServer.url.fget(server)  # type: ignore[attr-defined]
        raw = redis.Redis.from_url(url)
        bench = budget.Bench(url, raw)
        try:
            runs = []
            for _ in range(rounds):
                bench.reset()
                runs.append({r.name: r for r in measure(bench, path, events)})
        finally:
            raw.close()
    names = {name for found in runs for name in found}
    none = Share("", 0.0, 0.0)
    rows = [
        Share(
            name,
            statistics.median(found.get(name, none).calls for found in runs),
            statistics.median(found.get(name, none).us for found in runs),
        )
        for name in names
    ]
    return sorted(rows, key=lambda s: -s.us)


def table(rows: list[Share]) -> str:
    lines = ["| command or script | calls/event | server µs/event |", "|---|---|---|"]
    lines += [f"| {r.name} | {r.calls:.2f} | {r.us:.1f} |" for r in rows if r.us >= 0.05]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m durables_bench.script_time", description=__doc__
    )
    parser.add_argument("--only", choices=list(budget.PATHS), metavar="PATH", required=True,
                        help=f"one of: {', '.join(budget.PATHS)}")  # fmt: skip
    parser.add_argument("--events", type=at_least_one, default=None)
    parser.add_argument("--rounds", type=at_least_one, default=3,
                        help="runs of the path; each row is their median (default 3)")  # fmt: skip
    args = parser.parse_args(argv)
    default = 1000 if args.only in budget.ONE_AT_A_TIME else 30_000
    events = args.events or default
    rows = run(args.only, events, args.rounds)
    print(f"{args.only}, {events} events, median of {args.rounds} runs, durables:")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
