"""The report for people: rich tables drawn from the same document `--json` prints."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

Doc = dict[str, Any]
VARIANT_LABELS = {"durables": "durables", "raw": "raw redis-py", "peer": "nats JetStream"}
TIMES = "\u00d7"
WIDTH_WHEN_PIPED = 130


def header(machine: Doc, quick: bool) -> str:
    """Server versions, client libraries and the machine."""
    hiredis = " + hiredis" if machine["hiredis"] else " (no hiredis)"
    nats = f"nats-server {machine['nats_server']}" if machine["nats_server"] else "no nats-server"
    parts = [
        f"valkey {machine['valkey']}",
        nats,
        f"Python {machine['python']}",
        f"redis-py {machine['redis_py']}{hiredis}",
        f"nats-py {machine['nats_py'] or '(not installed)'}",
    ]
    box = f"{machine['cpus']} CPUs ({machine['cpu']}), {machine['memory_gib']} GiB RAM"
    mode = " [yellow](--quick: sizes too small for real figures)[/]" if quick else ""
    title = f"[bold]durables bench {machine['durables']}[/]{mode}"
    return "\n".join([title, " · ".join(parts), f"{box} · {machine['machine']}"])


def _missing(row: Doc, variant: str) -> str:
    note = row["notes"].get(variant, "")
    if note.startswith("n/a"):
        return "[yellow]n/a (not supported yet)[/]"
    if note.startswith("failed"):
        return "[red]failed[/]"
    return "[dim]—[/]"


def _rate(row: Doc, variant: str) -> str:
    value = row[f"{variant}_per_s"]
    return _missing(row, variant) if value is None else f"{value:,.0f}"


def _memory_rate(row: Doc) -> str:
    """durables on `memory://` (no server: fakeredis in the bench's process), for information."""
    value = row.get("memory_per_s")
    return _missing(row, "memory") if value is None else f"{value:,.0f}"


def _times(value: float | None, digits: int = 2) -> str:
    return "[dim]—[/]" if value is None else f"{value:.{digits}f}{TIMES}"


def _ms(value: float | None) -> str:
    return "[dim]—[/]" if value is None else f"{value:.3f}"


def _us(value: float | None) -> str:
    return "[dim]—[/]" if value is None else f"{value:.1f}"


def _bytes(value: float | None) -> str:
    return "[dim]—[/]" if value is None else f"{value:,.1f}"


def _target(row: Doc) -> str:
    target = row["target"]
    if target is None:
        return ""
    mark = {True: "[green]✓[/]", False: "[red]✗[/]", None: "[dim]?[/]"}[target["met"]]
    return f"{mark} {target['goal']} [dim]({target['detail']})[/]"


def _table(title: str, columns: list[str]) -> Table:
    """Names and targets left, figures right; the scenario name never wraps."""
    table = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        text = i == 0 or column in ("client", "target")
        table.add_column(column, justify="left" if text else "right", no_wrap=i == 0)
    return table


def throughput_table(rows: list[Doc]) -> Table:
    table = _table(
        "Throughput (events/s; server CPU µs per event; medians of rounds)",
        [
            "scenario",
            "durables",
            "raw",
            "nats",
            f"{TIMES} raw",
            f"{TIMES} nats",
            "server µs d/r/n",
            "memory://",
        ],
    )
    table.add_column("target")
    for row in rows:
        server = " / ".join(_us(row.get(f"{v}_server_us")) for v in VARIANT_LABELS)
        table.add_row(
            row["name"],
            *(_rate(row, v) for v in VARIANT_LABELS),
            _times(row["ratio_raw"]),
            _times(row["ratio_peer"]),
            server,
            _memory_rate(row),
            _target(row),
        )
    return table


def latency_table(rows: list[Doc]) -> Table:
    table = _table(
        "End-to-end latency (ms; the server's CPU µs per event, and its busy share of a core)",
        [
            "scenario",
            "client",
            "p50",
            "p99",
            "p99.9",
            "events/s",
            "per call",
            "server µs",
            "busy",
            "target",
        ],
    )
    for row in rows:
        for variant, label in VARIANT_LABELS.items():
            prefix = "" if variant == "durables" else f"{variant}_"
            figures = [row[f"{prefix}{p}_ms"] for p in ("p50", "p99", "p99_9")]
            measured = figures[0] is not None
            cells = [_ms(f) for f in figures] if measured else [_missing(row, variant), "", ""]
            per_call = row[f"{variant}_events_per_call"]
            busy = row.get(f"{variant}_server_busy")
            first = variant == "durables"
            table.add_row(
                row["name"] if first else "",
                label,
                *cells,
                _rate(row, variant) if measured else "",
                "" if per_call is None else f"{per_call:.2f}",
                _us(row.get(f"{variant}_server_us")) if measured else "",
                "" if busy is None else f"{busy:.0%}",
                _target(row) if first else "",
                end_section=variant == "peer",
            )
    return table


def memory_table(rows: list[Doc]) -> Table:
    table = _table(
        "Server memory (bytes per event; nats: bytes stored)",
        ["scenario", "durables", "raw", "nats", f"{TIMES} raw", "INFO durables / raw", "target"],
    )
    for row in rows:
        cells = [
            _bytes(row[f"{v}_bytes"]) if row[f"{v}_bytes"] is not None else _missing(row, v)
            for v in VARIANT_LABELS
        ]
        info = " / ".join(_bytes(row[f"{v}_info_bytes"]) for v in ("durables", "raw"))
        table.add_row(row["name"], *cells, _times(row["ratio_bytes_raw"], 3), info, _target(row))
    return table


def notes(rows: list[Doc]) -> list[str]:
    lines: list[str] = []
    for row in rows:
        for variant, note in row["notes"].items():
            line = f"{row['name']} / {VARIANT_LABELS.get(variant, variant)}: {note}"
            if line not in lines:
                lines.append(line)
    return lines


def render(doc: Doc, console: Console | None = None) -> None:
    """Header, one table per kind of scenario, then the notes."""
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=WIDTH_WHEN_PIPED)
    console.print(header(doc["machine"], doc["quick"]), highlight=False)
    makers = {"throughput": throughput_table, "latency": latency_table, "memory": memory_table}
    for kind, make in makers.items():
        rows = [r for r in doc["scenarios"] if r["table"] == kind]
        if rows:
            console.print()
            console.print(make(rows))
    for line in notes(doc["scenarios"]):
        console.print(f"[dim]note:[/] {line}", highlight=False)
