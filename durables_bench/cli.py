"""`durables bench` / `python -m durables_bench`: start the servers, run, report."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console

from . import peer
from .env import Env
from .machine import facts
from .registry import SCENARIOS, select
from .report import render
from .results import Row
from .scenario import Scenario
from .servers import NatsServer, ServerStartError, ValkeyServer, nats_binary

EXIT_OK = 0
EXIT_SERVER = 1
EXIT_USAGE = 2
NO_NATS = "nats-server is not installed (apt-get install nats-server): no peer column"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="durables bench",
        description="Measure durables against raw redis-py and nats-py JetStream, side by side.",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks, not figures")
    parser.add_argument("--json", action="store_true", help="print only JSON on stdout")
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run these scenarios only: a name, a glob or a family (consume); repeatable",
    )
    parser.add_argument("--rounds", type=int, help="rounds per throughput scenario [3; quick 1]")
    parser.add_argument("--no-peer", action="store_true", help="skip nats even if installed")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    return parser


def _start_peer(stack: ExitStack, workdir: Path, wanted: bool) -> NatsServer | str:
    """The running nats-server, or why there is none."""
    if not wanted:
        return "skipped (--no-peer)"
    missing = peer.available()
    binary = nats_binary()
    if missing is not None or binary is None:
        return missing or NO_NATS
    server = NatsServer(workdir / "nats", binary)
    server.start()
    stack.callback(server.stop)
    return server


def run(env: Env, scenarios: Sequence[Scenario], progress: Console) -> list[Row]:
    """Every scenario in order, each row judged against its target."""
    rows: dict[str, Row] = {}
    for scenario in scenarios:
        started = time.monotonic()
        for row in scenario.run(env):
            row.target = scenario.target(row, rows)
            rows[row.name] = row
        took = time.monotonic() - started
        progress.print(f"[dim]▸ {scenario.name} ({took:.1f} s)[/]", highlight=False)
    return list(rows.values())


def _measure(args: argparse.Namespace, scenarios: list[Scenario], progress: Console) -> Any:
    rounds = args.rounds or (1 if args.quick else 3)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="durables-bench-") as tmp, ExitStack() as stack:
        valkey = ValkeyServer(Path(tmp) / "valkey")
        valkey.start()
        stack.callback(valkey.stop)
        nats = _start_peer(stack, Path(tmp), not args.no_peer)
        if isinstance(nats, str):
            env = Env(valkey.url, None, nats, args.quick, max(1, rounds))
        else:
            env = Env(valkey.url, nats.url, "", args.quick, max(1, rounds), nats.pid)
        rows = run(env, scenarios, progress)
        machine = facts(valkey.version(), None if isinstance(nats, str) else nats.version())
    return {
        "machine": machine,
        "quick": args.quick,
        "rounds": env.rounds,
        "peer": {"name": "nats-py JetStream durable pull consumers", "note": env.peer_note or None},
        "elapsed_s": round(time.monotonic() - started, 1),
        "scenarios": [row.to_json() for row in rows],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit code (0, or 1 if a server would not start)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse has printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if args.list:
        for scenario in SCENARIOS:
            rows = scenario.row_names
            extra = f" (rows {', '.join(rows)})" if rows != [scenario.name] else ""
            print(f"{scenario.name:<20} {scenario.title}{extra}")
        return EXIT_OK
    scenarios = select(args.only)
    progress = Console(stderr=True)
    if not scenarios:
        progress.print(f"error: no scenario matches {args.only}; see --list", style="red")
        return EXIT_USAGE
    try:
        doc = _measure(args, scenarios, progress)
    except ServerStartError as exc:
        progress.print(f"error: {exc}", style="red", highlight=False)
        return EXIT_SERVER
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render(doc)
    return EXIT_OK
