"""The `durables` group: shared options, error handling and the commands."""

from __future__ import annotations

from typing import Any, NoReturn

import click
from click.exceptions import NoArgsIsHelpError

import durables

from . import exits, output
from .audit import audit
from .bench import bench
from .channels import channel, channels, delete, publish, purge
from .console import console
from .context import State
from .dead_letters import dead_letters
from .demo import demo
from .durable import create, inspect, list_durables, tail
from .housekeep import housekeep
from .metrics import metrics
from .server import server
from .sessions import sessions
from .watch import watch


class DurablesGroup(click.Group):
    """Turns the library's errors, and click's own (a bad option, a missing argument),
    into one line `error: message` on stderr and a named exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in the order added: by theme, not alphabetically

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:  # the group's own options: `durables --bogus`
            click_error(exc)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except durables.DurablesError as exc:
            output.fail(str(exc), exits.exit_code(exc))
        except click.ClickException as exc:  # a command's options and arguments
            click_error(exc)


def click_error(exc: click.ClickException) -> NoReturn:
    """click's error on one line, with where to find help, and click's code (USAGE for
    usage errors). Help shown because no argument was given stays as click shows it."""
    if isinstance(exc, NoArgsIsHelpError):
        raise exc
    message = " ".join(exc.format_message().split()).removesuffix(".")
    message = message[:1].lower() + message[1:]
    context = getattr(exc, "ctx", None)
    if isinstance(context, click.Context):
        message += f" (see '{context.command_path} -h')"
    output.fail(message, exc.exit_code)


@click.group(cls=DurablesGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="DURABLES_URL",
    metavar="URL",
    help="server URL: redis://, rediss://, redis+sentinel://h:p[,h:p]/primary or "
    "redis+cluster://h:p [env DURABLES_URL; default: embedded server].",
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
    dead_letters,
    sessions,
    audit,
    watch,
    console,
    housekeep,
    metrics,
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
