"""The server's instructions per event on each path, counted by valgrind's callgrind.

The budget's CPU times move by a third from run to run on a shared machine; the number
of instructions the server executes for the same work does not (two runs of the shared
hand-off agreed within 0.4 %). So a change of a few per cent in the server's work, too
small to see in `durables bench` or in the budget, shows here. The server runs under
callgrind, which counts every instruction in user space (not the kernel's: sockets,
`epoll`), about fifty times slower than it runs alone; each path of the budget
(`durables_bench.budget`) is set up, the counters are zeroed, the measured step runs,
and the counts are dumped. Needs `valgrind` (`apt-get install valgrind`).

Run it with `python -m durables_bench.instructions [--events N] [--only PATH] [--json]`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Generator
from dataclasses import asdict, dataclass
from pathlib import Path

import redis

from . import budget
from .env import at_least_one
from .servers import ValkeyServer


class ToolMissingError(RuntimeError):
    """valgrind (and its callgrind_control) is not installed: nothing can be counted."""


@dataclass(frozen=True)
class Count:
    """One path through one variant: the server's instructions per event."""

    path: str
    variant: str
    events: int
    instructions: int


class CallgrindValkey(ValkeyServer):
    """The benchmark's valkey, run under callgrind; `zero()` and `dump()` bracket a
    measured step."""

    name = "valkey-callgrind"
    start_timeout_s = 60.0
    """Under callgrind the server takes seconds to start, not milliseconds."""
    settings = {"hz": "1"}  # noqa: RUF012 (read only)
    """The server's timer work (serverCron, 10 times a second by default) grows with the
    step's wall time, which callgrind and a busy machine stretch: once a second keeps it
    out of the count of the step, so two counts agree on a loaded machine too."""

    def command(self) -> list[str]:
        out = self.workdir / "callgrind.out.%p"
        return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *super().command()]

    def zero(self) -> None:
        self._control("-z")

    def dump(self) -> int:
        """Dump the counts since the last zero; their total."""
        before = set(self.workdir.glob("callgrind.out.*.*"))
        self._control("-d")
        (new,) = set(self.workdir.glob("callgrind.out.*.*")) - before
        return summary(new.read_text(errors="replace"))

    def _control(self, flag: str) -> None:
        subprocess.run(
            ["callgrind_control", flag, str(self.pid)],
            check=True,
            capture_output=True,
            timeout=self.start_timeout_s,
        )


def summary(dump: str) -> int:
    """The instructions a callgrind dump counted (its `summary:` line)."""
    for line in dump.splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise ValueError("not a callgrind dump: it has no summary line")


def run(events: int, only: list[str] | None = None) -> list[Count]:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise ToolMissingError("valgrind is not installed (apt-get install valgrind)")
    counts = []
    with tempfile.TemporaryDirectory() as work:
        server = CallgrindValkey(Path(work))
        server.start()
        bench = budget.Bench(server.url, redis.Redis.from_url(server.url, socket_timeout=120))
        try:
            for name, (ours, theirs) in budget.PATHS.items():
                if only and name not in only:
                    continue
                n = events if name not in budget.ONE_AT_A_TIME else max(100, events // 4)
                for variant, make in (("durables", ours), ("raw", theirs)):
                    bench.reset()
                    counts.append(Count(name, variant, n, _count(server, make(bench, n))))
        finally:
            bench.raw.close()
            server.stop()
    return counts


def _count(server: CallgrindValkey, steps: Generator[budget.Step, None, None]) -> int:
    step = next(steps)  # set up, warmed
    server.zero()
    try:
        step()
    finally:
        instructions = server.dump()
        steps.close()
    return instructions


def table(counts: list[Count]) -> str:
    raw = {c.path: c.instructions / c.events for c in counts if c.variant == "raw"}
    lines = ["| path | variant | server instructions/event | ÷ raw |", "|---|---|---|---|"]
    for c in counts:
        per = c.instructions / c.events
        ratio = f"{per / raw[c.path]:.2f}" if raw.get(c.path) else "-"
        lines.append(f"| {c.path} | {c.variant} | {per:,.0f} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m durables_bench.instructions", description=__doc__
    )
    parser.add_argument("--events", type=at_least_one, default=2000)
    parser.add_argument(
        "--only",
        action="append",
        choices=list(budget.PATHS),
        metavar="PATH",
        help=f"one of: {', '.join(budget.PATHS)} (repeatable)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        counts = run(args.events, args.only)
    except ToolMissingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps([asdict(c) for c in counts], indent=2) if args.json else table(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
