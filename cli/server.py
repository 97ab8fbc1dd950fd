"""`durables server start|stop|status`: the embedded server under $DURABLES_HOME."""

from __future__ import annotations

from typing import cast

import click

from durables.server.embedded import EmbeddedServer, Fsync
from durables.settings import load_settings

from . import output
from .context import json_option


def _server(fsync: str | None = None, port: int = 0) -> EmbeddedServer:
    """The embedded server of the configured home (DURABLES_HOME, durables.toml)."""
    settings = load_settings()
    policy = cast(Fsync, fsync or settings.fsync)
    return EmbeddedServer(settings.home_dir, port=port, fsync=policy)


@click.group("server")
def server() -> None:
    """The embedded server (used when no --url).

    Its data lives under $DURABLES_HOME (default ~/.local/share/durables).
    """


@server.command("start")
@click.option(
    "--fsync",
    type=click.Choice(["everysec", "always"]),
    help="AOF fsync policy; 'always' loses nothing acknowledged. [default: from settings]",
)
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="0 picks a free port.")
def start(fsync: str | None, port: int) -> None:
    """Start the server in the background.

    Nothing to do if it runs already. Prints its URL.
    """
    embedded = _server(fsync, port)
    status = embedded.status()
    if status.running:
        output.say(f"already running: {status.url} (pid {status.pid}, home {status.home})")
        return
    output.say(f"started: {embedded.start()} (home {embedded.home})")


@server.command("stop")
def stop() -> None:
    """Stop the server; its append-only file is flushed first."""
    embedded = _server()
    if embedded.stop():
        output.say(f"stopped the server of {embedded.home}")
    else:
        output.say(f"no server was running for {embedded.home}")


@server.command("status")
@json_option
def status(as_json: bool) -> None:
    """Show whether the server runs.

    With its pid, port, URL, version and home.
    """
    found = _server().status()
    output.show_record("embedded server", found, as_json)
