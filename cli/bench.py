"""`durables bench`: the benchmark, whose options are its own (see `durables bench --help`)."""

from __future__ import annotations

import click


@click.command(
    "bench",
    context_settings={"ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(args: tuple[str, ...]) -> None:
    """Measure durables against raw redis-py and NATS JetStream (--help for options)."""
    from durables.bench import main

    raise SystemExit(main(list(args)))
