"""The `durables` group: shared options, error handling and the commands."""

from __future__ import annotations

from typing import Any

import click

import durables

from . import exits, output
from .bench import bench
from .channels import channel, channels, delete, publish, purge
from .context import State
from .demo import demo
from .durable import create, inspect, list_durables, tail
from .housekeep import housekeep
from .server import server
from .sessions import sessions
from .watch import watch


class DurablesGroup(click.Group):
    """Turns the library's errors into `error: message` and a named exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in the order added: by theme, not alphabetically

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except durables.DurablesError as exc:
            output.fail(str(exc), exits.exit_code(exc))


@click.group(cls=DurablesGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="DURABLES_URL",
    metavar="URL",
    help="redis:// or rediss:// URL of the server [env DURABLES_URL; default: embedded server].",
)
@click.option(
    "--namespace",
    envvar="DURABLES_NAMESPACE",
    metavar="NS",
    help="Key prefix, to share one server between applications [env DURABLES_NAMESPACE].",
)
@click.version_option(durables.__version__, prog_name="durables")
@click.pass_context
def cli(ctx: click.Context, url: str | None, namespace: str | None) -> None:
    """Durable, shared and serial subscriptions on Redis Streams: admin commands."""
    state = State(url, namespace)
    ctx.obj = state
    ctx.call_on_close(state.close)


for command in (
    channels,
    channel,
    list_durables,
    inspect,
    create,
    purge,
    delete,
    publish,
    tail,
    sessions,
    watch,
    housekeep,
    server,
    demo,
    bench,
):
    cli.add_command(command)


def main() -> None:
    """The console script `durables`."""
    cli(prog_name="durables")


if __name__ == "__main__":
    main()
