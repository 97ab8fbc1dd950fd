"""Channel commands: list, create or change, publish, purge, delete."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, cast

import click

import durables
from durables import ids

from . import output, progress
from .audit import note
from .context import State, json_option, pass_state, yes_option

if TYPE_CHECKING:
    from durables.channel import FullPolicy

PropertyValue = str | int | float | bool

_INT = re.compile(r"-?(0|[1-9]\d*)")
_FLOAT = re.compile(r"-?(\d+\.\d*|\.\d+|\d+(?=[eE]))([eE][-+]?\d+)?")
_QUOTED = re.compile(r"""(["'])(.*)\1""", re.DOTALL)
_ID_MS = re.compile(r"(\d{1,20})(?:-\d{1,20})?")

PURGE_SLICE = 5_000
"""On a terminal, a channel longer than this is purged in about this many events at a
time, so the bar moves (and the server is not held by one long purge)."""


def property_value(text: str) -> PropertyValue:
    """`5` int, `1.5` float, `true`/`false` bool, `"5"` (quoted) or anything else str.

    Numbers with leading zeros, `inf` and `nan` stay strings, so nothing is lost.
    """
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    quoted = _QUOTED.fullmatch(text)
    return quoted.group(2) if quoted else text


def parse_properties(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, PropertyValue]:
    """The click callback of `-p NAME=VALUE`, given any number of times."""
    properties: dict[str, PropertyValue] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", ctx=ctx, param=param)
        properties[name.strip()] = property_value(value)
    return properties


@click.command("channels")
@json_option
@pass_state
def channels(state: State, as_json: bool) -> None:
    """List the channels of the namespace."""
    infos = state.client().channels()
    if as_json:
        output.print_json(infos)
        return
    if not infos:
        output.say(f"no channels in namespace {state.client().namespace!r}")
        return
    columns = ("channel", "length", "first id", "last id", "durables", "ttl s", "capacity")
    rows = [
        (i.name, i.length, i.first_id, i.last_id, len(i.durables), i.ttl_s, i.capacity)
        for i in infos
    ]
    output.show(output.table(None, columns, rows))


@click.command("channel")
@click.argument("name")
@click.option("--ttl", type=click.FloatRange(min=0, min_open=True), help="Event lifespan, s.")
@click.option("--capacity", type=click.IntRange(min=1), help="Most events the channel keeps.")
@click.option(
    "--full",
    type=click.Choice(["reject", "drop_oldest"]),
    help="What a channel at capacity does with a new event.",
)
@click.option("--keyed/--not-keyed", default=None, help="Keep the last value of each key.")
@json_option
@pass_state
def channel(
    state: State,
    name: str,
    ttl: float | None,
    capacity: int | None,
    full: str | None,
    keyed: bool | None,
    as_json: bool,
) -> None:
    """Create or change a channel.

    Creates channel NAME if needed and stores the options given (others keep their
    value), then shows the channel.
    """
    policy = cast("FullPolicy | None", full)  # click.Choice allowed only these
    client = state.client()
    info = client.channel(name, keyed=keyed, ttl=ttl, capacity=capacity, full=policy).info()
    output.show_record(f"channel {info.name}", info, as_json)


@click.command("publish")
@click.argument("channel_name", metavar="CHANNEL")
@click.argument("data")
@click.option("-k", "--key", help="The event's key (keyed channels keep its last value).")
@click.option(
    "-p",
    "--property",
    "properties",
    multiple=True,
    metavar="NAME=VALUE",
    callback=parse_properties,
    help="A property; numbers and true/false are typed, quote a value to keep it a string.",
)
@pass_state
def publish(
    state: State,
    channel_name: str,
    data: str,
    key: str | None,
    properties: dict[str, PropertyValue],
) -> None:
    """Publish an event; prints its id.

    DATA is the payload (`-` reads it from stdin). CHANNEL must exist.
    """
    payload: bytes | str = sys.stdin.buffer.read() if data == "-" else data
    target = state.client().get_channel(channel_name)
    click.echo(target.publish(payload, key=key, properties=properties or None))


@click.command("purge")
@click.argument("channel_name", metavar="CHANNEL")
@click.option("--up-to", metavar="ID", help="Remove events up to and including this id only.")
@yes_option
@pass_state
def purge(state: State, channel_name: str, up_to: str | None, yes: bool) -> None:
    """Remove a channel's events for every durable.

    All of them, or those up to and including --up-to. Asks first unless --yes.
    """
    if up_to is not None:
        up_to = ids.normal(up_to)  # refused before anything is asked or removed
    target = state.client().get_channel(channel_name)
    held = target.info()
    if held.first_id is None or (up_to and ids.key(up_to) < ids.key(held.first_id)):
        output.say(
            f"nothing to purge: channel {channel_name!r} holds no events"
            f"{f' up to id {up_to}' if up_to else ''}"
        )
        return
    which = f"the events up to and including id {up_to}" if up_to else f"all {held.length} events"
    output.confirm(
        f"Remove {which} of channel {channel_name!r} for every durable?",
        yes,
        "nothing purged",
    )
    info = target.info()
    if progress.on_terminal() and info.length > PURGE_SLICE:
        removed = _purge_in_slices(target, info, up_to)
    else:
        removed = target.purge(up_to=up_to)
    done = f"purged {removed} events from channel {channel_name!r}"
    note(state, "purge", f"channel {channel_name}", done)
    output.say(done)


def _purge_in_slices(
    target: durables.Channel, info: durables.ChannelInfo, up_to: str | None
) -> int:
    """Purge up to `up_to` (None: everything) in steps over the ids' time span, with a bar;
    the last step is the purge asked for, so the outcome is that of one purge."""
    first = _ms(info.first_id)
    last = _ms(up_to if up_to is not None else info.last_id)
    removed = 0
    with progress.bar(f"purging {info.name}", info.length if up_to is None else None) as advance:
        if first is not None and last is not None:
            steps = -(-info.length // PURGE_SLICE)
            for step in range(1, steps):
                cut = first + (last - first) * step // steps
                done = target.purge(up_to=f"{cut}-0")
                removed += done
                advance(done)
        done = target.purge(up_to=up_to)
        advance(done)
    return removed + done


def _ms(event_id: str | None) -> int | None:
    """The milliseconds part of an event id; None if it is not one (the library says why)."""
    match = _ID_MS.fullmatch(event_id) if event_id is not None else None
    return int(match.group(1)) if match else None


@click.command("delete")
@click.argument("channel_name", metavar="CHANNEL")
@click.argument("durable_name", metavar="[DURABLE]", required=False)
@yes_option
@pass_state
def delete(state: State, channel_name: str, durable_name: str | None, yes: bool) -> None:
    """Delete a channel, or one of its durables.

    Without DURABLE, the channel goes with its events and durables. Asks first
    unless --yes.
    """
    target = state.client().get_channel(channel_name)
    if durable_name is not None:
        durable = target.get_durable(durable_name)
        output.confirm(
            f"Delete durable {durable_name!r} of channel {channel_name!r}?", yes, "nothing deleted"
        )
        durable.delete()
        done = f"deleted durable {durable_name!r} of channel {channel_name!r}"
        note(state, "delete-durable", f"durable {channel_name}/{durable_name}", done)
        output.say(done)
        return
    info = target.info()
    names = f" ({', '.join(info.durables)})" if info.durables else ""
    output.confirm(
        f"Delete channel {channel_name!r} with its {info.length} events "
        f"and {len(info.durables)} durables{names}?",
        yes,
        "nothing deleted",
    )
    target.delete()
    done = f"deleted channel {channel_name!r}"
    note(state, "delete-channel", f"channel {channel_name}", done)
    output.say(done)
