"""`durables watch`: a live dashboard of channels and the depths of their durables."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime

import click
from redis.exceptions import RedisError
from rich.console import RenderableType
from rich.live import Live
from rich.text import Text

import durables
from durables.urls import shown

from . import output, progress
from .context import State, json_option, pass_state
from .interrupts import stop_requested


@dataclass(frozen=True)
class Snapshot:
    """One channel and its durables at one moment."""

    channel: durables.ChannelInfo
    durables: list[durables.DurableInfo]


def snapshot(client: durables.Client) -> list[Snapshot]:
    """Every channel with its durables; one deleted meanwhile is left out."""
    frames = []
    for info in client.channels():
        try:
            found = client.get_channel(info.name).durables()
        except (durables.ChannelNotFoundError, durables.DurableNotFoundError):
            continue
        frames.append(Snapshot(info, found))
    return frames


def render(client: durables.Client, frames: list[Snapshot]) -> RenderableType:
    title = f"{client.namespace} @ {shown(client.url)}  {datetime.now():%H:%M:%S}"
    if not frames:
        return Text(f"{title}\nno channels")
    columns = ("channel", "length", "durable", "kind", "depth", "txn depth", "consumers")
    rows: list[tuple[object, ...]] = []
    for frame in frames:
        head: tuple[object, ...] = (frame.channel.name, frame.channel.length)
        if not frame.durables:
            rows.append((*head, None, None, None, None, None))
        for i, d in enumerate(frame.durables):
            lead = head if i == 0 else ("", "")
            rows.append((*lead, d.name, d.kind, d.depth, d.transaction_depth, d.consumers))
    return output.table(title, columns, rows)


@click.command("watch")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=1.0,
    show_default=True,
    metavar="S",
    help="Seconds between refreshes.",
)
@click.option("--once", is_flag=True, help="Show one frame and exit.")
@json_option
@pass_state
def watch(state: State, interval: float, once: bool, as_json: bool) -> None:
    """A live dashboard of channels and durables.

    Shows each channel's length and its durables' depth and transaction depth,
    refreshed every S seconds until Ctrl-C, through outages ("down since ..."). Piped,
    or with --json (one JSON line per frame), it prints a frame every S seconds.
    """
    if once:
        client = state.client()
        frames = snapshot(client)
        if as_json:
            output.print_json(frames)
        else:
            output.show(render(client, frames))
        return
    outage = Outage()
    if as_json or not progress.on_terminal():
        _print_frames(state, outage, interval, as_json)
        return
    with (
        stop_requested() as stop,
        Live(_frame(state, outage), console=output.console()) as live,
    ):
        while not stop.sleep(interval):
            live.update(_frame(state, outage))


RECONNECT_TIMEOUT_S = 2.0
"""How long one refresh waits out a lost connection before showing the server as down."""


@dataclass
class Outage:
    """Since when the server could not be read (None: it could at the last refresh)."""

    since: datetime | None = None
    error: str = ""


def _read(state: State, outage: Outage) -> tuple[durables.Client, list[Snapshot]] | None:
    """The client and the frames now; None while the server cannot be read (the outage
    then says since when)."""
    try:
        client = state.live_client(reconnect_timeout_s=RECONNECT_TIMEOUT_S)
        frames = snapshot(client)
    except (durables.DurablesError, RedisError, OSError) as exc:
        if outage.since is None:
            outage.since = datetime.now()
        outage.error = str(exc) or type(exc).__name__
        return None
    outage.since = None
    return client, frames


def _down(outage: Outage) -> str:
    since = outage.since or datetime.now()
    return f"server down since {since:%H:%M:%S}: {outage.error} (still trying; Ctrl-C stops)"


def _frame(state: State, outage: Outage) -> RenderableType:
    read = _read(state, outage)
    if read is None:
        return Text(f"{datetime.now():%H:%M:%S}  {_down(outage)}")
    return render(*read)


def _print_frames(state: State, outage: Outage, interval: float, as_json: bool) -> None:
    """A frame (or a JSON line) every `interval`, written as it is taken: for a pipe."""
    with stop_requested() as stop:
        while True:
            read = _read(state, outage)
            if read is None and as_json:
                since = (outage.since or datetime.now()).isoformat(timespec="seconds")
                output.print_json({"down_since": since, "error": outage.error}, lines=True)
            elif read is None:
                click.echo(f"{datetime.now():%H:%M:%S}  {_down(outage)}")
            elif as_json:
                output.print_json(read[1], lines=True)
            else:
                output.show(render(*read))
            sys.stdout.flush()
            if stop.sleep(interval):
                return
