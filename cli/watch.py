"""`durables watch`: a live dashboard of channels and the depths of their durables."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import click
from rich.console import RenderableType
from rich.live import Live
from rich.text import Text

import durables
from durables.urls import shown

from . import output
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
        except (durables.ChannelNotFound, durables.DurableNotFound):
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
    refreshed every S seconds until Ctrl-C. With --json, prints one snapshot per
    interval as a JSON line instead.
    """
    client = state.client()
    if once or as_json:
        _print_frames(client, once, interval, as_json)
        return
    with (
        stop_requested() as stop,
        Live(render(client, snapshot(client)), console=output.console()) as live,
    ):
        while not stop.sleep(interval):
            live.update(render(client, snapshot(client)))


def _print_frames(client: durables.Client, once: bool, interval: float, as_json: bool) -> None:
    with stop_requested() as stop:
        while True:
            frames = snapshot(client)
            if as_json:
                output.print_json(frames, lines=not once)
            else:
                output.show(render(client, frames))
            if once or stop.sleep(interval):
                return
