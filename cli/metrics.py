"""`durables metrics`: the namespace in the Prometheus text format, printed or served."""

from __future__ import annotations

from collections.abc import Callable

import click
from prometheus_client import start_http_server

import durables
from durables.metrics import exposition, registry

from . import exits, output
from .context import State, pass_state
from .interrupts import stop_requested

RECONNECT_TIMEOUT_S = 2.0
"""How long a scrape waits out a lost connection before reporting `durables_up 0`
(Prometheus gives a scrape 10 s by default)."""


@click.command("metrics")
@click.option(
    "--serve",
    "port",
    type=click.IntRange(0, 65535),
    metavar="PORT",
    help="Serve the metrics over HTTP on PORT (at /metrics) until interrupted.",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on with --serve."
)
@click.option(
    "--per-session",
    is_flag=True,
    help="Also one series per session (else sessions are summed by state).",
)
@pass_state
def metrics(state: State, port: int | None, host: str, per_session: bool) -> None:
    """Channels, durables, sessions and the server as Prometheus metrics.

    Prints them once, or with --serve PORT serves them to Prometheus: each scrape reads
    the server afresh, and durables_up is 0 while the server cannot be read.
    """
    if port is None and host != "127.0.0.1":
        raise click.UsageError("--host applies only with --serve")
    if port is None:
        client = state.client(reconnect_timeout_s=RECONNECT_TIMEOUT_S)
        click.echo(exposition(client, per_session), nl=False)
        return
    state.server_url()  # none named and none running: one line now, not at every scrape
    serve(
        lambda: state.live_client(reconnect_timeout_s=RECONNECT_TIMEOUT_S), host, port, per_session
    )


def serve(
    client: Callable[[], durables.Client], host: str, port: int, per_session: bool = False
) -> None:
    """Serve the metrics of the client `client()` returns on host:port until Ctrl-C or
    SIGTERM; while it cannot connect, each scrape says `durables_up 0`."""
    try:
        reg = registry(client, per_session)
        server, thread = start_http_server(port, addr=host, registry=reg)
    except OSError as exc:
        output.fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", exits.CANNOT_LISTEN)
    where = f"[{host}]" if ":" in host else host
    output.say(f"serving metrics on http://{where}:{server.server_port}/metrics (Ctrl-C stops)")
    try:
        with stop_requested() as stop:
            while not stop.sleep(60):
                pass
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
