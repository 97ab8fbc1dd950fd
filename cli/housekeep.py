"""`durables housekeep`: trimming for deployments where no client runs to do it."""

from __future__ import annotations

from datetime import datetime

import click

import durables

from . import output
from .context import State, json_option, pass_state
from .interrupts import stop_requested


@click.command("housekeep")
@click.option(
    "--every",
    type=click.FloatRange(min=0, min_open=True),
    metavar="S",
    help="Repeat every S seconds until Ctrl-C.",
)
@json_option
@pass_state
def housekeep(state: State, every: float | None, as_json: bool) -> None:
    """Trim acknowledged and expired events.

    One round over every channel of the namespace (or one every S seconds until
    Ctrl-C), for deployments where no client runs to do it; prints what went.
    """
    client = state.client()
    if every is None:
        _report(client.housekeep(), as_json, lines=False)
        return
    with stop_requested() as stop:
        while True:
            _report(client.housekeep(), as_json, lines=True)
            if stop.sleep(every):
                return


def _report(report: durables.HousekeepReport, as_json: bool, *, lines: bool) -> None:
    """A table per round; with --json an object (a line per round when repeating)."""
    if as_json:
        record = {
            "channels": report.channels,
            "removed": report.removed,
            "total_removed": report.total_removed,
            "expired_sessions": report.expired_sessions,
            "closed_sessions": report.closed_sessions,
        }
        output.print_json(record, lines=lines)
        return
    stamp = datetime.now().strftime("%H:%M:%S")
    output.say(f"{stamp} removed {report.total_removed} events from {report.channels} channels")
    rows = [(name, removed) for name, removed in sorted(report.removed.items()) if removed]
    if rows:
        output.show(output.table(None, ("channel", "removed"), rows))
    for what, ids in (
        ("expired (their timeout passed while away)", report.expired_sessions),
        ("closed (an overflow while away)", report.closed_sessions),
    ):
        if ids:
            output.say(f"{len(ids)} sessions {what}: {', '.join(sorted(ids))}")
