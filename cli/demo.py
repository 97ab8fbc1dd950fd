"""`durables demo`: the library's guided tour, run against the chosen server."""

from __future__ import annotations

import click

from .context import State, pass_state
from .tour import run


@click.command("demo")
@click.option("--events", type=click.IntRange(min=1), default=20, show_default=True)
@pass_state
@click.pass_context
def demo(ctx: click.Context, state: State, events: int) -> None:
    """A guided tour against the chosen server.

    Publishes events and consumes them with each kind of durable, explaining as
    it goes.
    """
    ctx.exit(run(state.url, state.namespace, events=events))
