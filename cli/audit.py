"""`durables audit`: the admin actions taken on the namespace (by the console or the CLI),
as the server keeps them; and the note each destructive command leaves there."""

from __future__ import annotations

import getpass
import socket
import time

import click

from . import output
from .context import State, json_option, pass_state


def note(state: State, action: str, target: str, outcome: str) -> None:
    """Record an admin action done from this shell in the namespace's audit log."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = "unknown"
    state.client().record_audit(action, target, f"cli, {user}@{socket.gethostname()}", outcome)


@click.command("audit")
@click.option(
    "--count",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    metavar="N",
    help="How many of the newest entries to show.",
)
@json_option
@pass_state
def audit(state: State, count: int, as_json: bool) -> None:
    """Admin actions taken on the namespace, newest first: what, on what, when, from where.

    The console (--admin) and the CLI's purge, delete and dead-letters --replay record
    them on the server.
    """
    entries = state.client().audit(count)
    if as_json:
        output.print_json(entries)
        return
    if not entries:
        output.say("no admin actions recorded")
        return
    rows = [
        (
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.time_ms / 1000)),
            e.action,
            e.target,
            e.address,
            e.outcome,
        )
        for e in entries
    ]
    output.show(output.table("audit log", ("when (UTC)", "action", "on", "from", "outcome"), rows))
