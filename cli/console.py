"""`durables console`: the web console, served until interrupted."""

from __future__ import annotations

import ipaddress
import socket
from types import FrameType
from typing import TYPE_CHECKING

import click

from durables.urls import parse_url

from . import exits, output
from .context import State, pass_state

if TYPE_CHECKING:
    import uvicorn

STREAMS_CLOSE_S = 1
"""At a stop, open pages' event streams (which never end by themselves) are given this
long, then closed: without it a stop waits for every browser tab to go away."""
EXTRA_HINT = "the console needs its extra: pip install 'durables[console]'"


@click.command("console")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8480,
    show_default=True,
    help="Port to listen on (0: any free one).",
)
@click.option(
    "--admin",
    is_flag=True,
    help="Offer actions that change data: purge, delete, replay dead letters, close a session.",
)
@click.option(
    "--token",
    envvar="DURABLES_CONSOLE_TOKEN",
    metavar="T",
    help="Needed by every visitor (open the console with ?token=T); required to "
    "listen beyond this machine [env DURABLES_CONSOLE_TOKEN].",
)
@pass_state
def console(state: State, host: str, port: int, admin: bool, token: str | None) -> None:
    """A web console: channels, durables, consumers, sessions, dead letters and alerts,
    live in a browser.

    Read-only unless --admin. Listens on 127.0.0.1 unless given --host with a --token.
    """
    if not _loopback(host) and not token:
        output.fail(
            f"listening on {host} lets others in: give --token (or DURABLES_CONSOLE_"
            f"TOKEN), or keep --host 127.0.0.1",
            exits.INVALID,
        )
    parse_url(state.server_url())  # a bad URL is an error now, not an outage on every page
    try:
        import uvicorn

        from durables.console import ConsoleConfig, create_app
    except ImportError:
        output.fail(EXTRA_HINT, exits.ERROR)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        output.fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", exits.CANNOT_LISTEN)
    app = create_app(ConsoleConfig(state.url, state.namespace, admin=admin, token=token))
    where = f"[{host}]" if ":" in host else host
    mode = "admin" if admin else "read-only"
    output.say(
        f"serving the console ({mode}) on http://{where}:{sock.getsockname()[1]}/ (Ctrl-C stops)"
    )
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", timeout_graceful_shutdown=STREAMS_CLOSE_S
    )
    server = _quiet_stop(uvicorn.Server)(config)
    server.run(sockets=[sock])
    output.say("console stopped")


def _quiet_stop(base: type[uvicorn.Server]) -> type[uvicorn.Server]:
    """uvicorn, which after a graceful stop raises the signal again (so the process dies
    of it): a Ctrl-C or SIGTERM here is the way to stop, and ends with exit code 0, as
    `metrics --serve` does."""

    class Server(base):  # type: ignore[valid-type,misc]
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            captured = getattr(self, "_captured_signals", None)
            if isinstance(captured, list):
                captured.clear()

    return Server


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
