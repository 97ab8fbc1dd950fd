"""`durables bench`: the benchmark, whose options are its own (see `durables bench --help`).

The benchmark is the package `durables_bench`, which durables' wheel ships beside the
library (never inside it); it is imported only when this command runs."""

from __future__ import annotations

import importlib

import click

from . import exits, output

NOT_INSTALLED = (
    "the benchmark (the package durables_bench) is not installed with this durables: "
    "install durables from its wheel or a clone, with the benchmark's peer: "
    "pip install 'durables[bench]'"
)


@click.command(
    "bench",
    context_settings={"ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(args: tuple[str, ...]) -> None:
    """Measure durables against raw redis-py and NATS JetStream (--help for options)."""
    try:
        module = importlib.import_module("durables_bench")
    except ModuleNotFoundError as exc:
        if exc.name != "durables_bench":
            raise
        output.fail(NOT_INSTALLED, exits.ERROR)
    raise SystemExit(module.main(list(args)))
