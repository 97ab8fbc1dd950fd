"""`durables demo`: the library's guided tour, run against the chosen server."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

import click

from . import exits, output
from .context import State, pass_state

DemoRun = Callable[..., int]


@click.command("demo")
@click.option("--events", type=click.IntRange(min=1), default=20, show_default=True)
@pass_state
@click.pass_context
def demo(ctx: click.Context, state: State, events: int) -> None:
    """A guided tour against the chosen server.

    Publishes events and consumes them with each kind of durable, explaining as
    it goes.
    """
    try:
        module = importlib.import_module("durables.demo")  # lazily: only this command needs it
    except ModuleNotFoundError as exc:
        if exc.name != "durables.demo":
            raise
        output.fail("this version of durables has no demo", exits.ERROR)
    run = cast(DemoRun, module.run)
    ctx.exit(run(state.url, state.namespace, events=events))
