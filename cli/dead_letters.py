"""`durables dead-letters`: the events a durable gave up on, and replaying them."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

import click

import durables

from . import output, progress
from .audit import note
from .context import State, json_option, pass_state, yes_option

if TYPE_CHECKING:
    from durables.records import DeadLetter

REPLAY_BATCH = 500
"""On a terminal, dead letters are replayed this many at a time, so the bar moves."""


@click.command("dead-letters")
@click.argument("channel_name", metavar="CHANNEL")
@click.argument("durable_name", metavar="DURABLE")
@click.option("-n", "--count", type=click.IntRange(min=1), metavar="N", help="Only the N oldest.")
@click.option(
    "--replay",
    is_flag=True,
    help="Publish them to the channel again as new events, and drop them here.",
)
@yes_option
@json_option
@pass_state
def dead_letters(
    state: State,
    channel_name: str,
    durable_name: str,
    count: int | None,
    replay: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """List a durable's dead letters (oldest first), or replay them.

    A shared or serial durable with max_deliveries moves an event here once it was
    delivered that many times. --replay publishes them again as new events: every
    durable on the channel gets them. Asks first unless --yes.
    """
    durable = state.client().get_channel(channel_name).get_durable(durable_name)
    letters = durable.dead_letters(count)
    if replay:
        done = _replay(durable, len(letters), yes)
        if done:
            note(state, "replay", f"durable {channel_name}/{durable_name}", done)
    elif as_json:
        output.print_json([_record(d) for d in letters])
    elif not letters:
        output.say(f"no dead letters on durable {durable_name!r} of channel {channel_name!r}")
    else:
        columns = ("id", "event id", "key", "reason", "deliveries", "data")
        rows = [
            (d.id, d.origin_id, d.key, d.reason, d.deliveries, output.payload(d.data))
            for d in letters
        ]
        output.show(
            output.table(f"dead letters of {durable_name} on {channel_name}", columns, rows)
        )


def _replay(durable: durables.Durable, total: int, yes: bool) -> str | None:
    """Replay up to `total` dead letters; what was done (None: nothing to do)."""
    where = f"durable {durable.name!r} of channel {durable.channel_name!r}"
    if not total:
        output.say(f"no dead letters on {where}")
        return None
    output.confirm(
        f"Publish {total} dead letters of {where} again (every durable on it gets them)?",
        yes,
        "nothing replayed",
    )
    if not progress.on_terminal():
        replayed = durable.replay_dead_letters(total)
    else:
        replayed = 0
        with progress.bar("replaying", total) as advance:
            while replayed < total:  # bounded: letters that die again are not taken twice
                done = durable.replay_dead_letters(min(REPLAY_BATCH, total - replayed))
                if not done:
                    break
                replayed += done
                advance(done)
    said = f"replayed {replayed} dead letters of {where}"
    output.say(said)
    return said


def _record(letter: DeadLetter) -> dict[str, object]:
    """A dead letter as JSON: the payload as UTF-8 text where it is, else base64."""
    try:
        data, encoding = letter.data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        data, encoding = base64.b64encode(letter.data).decode("ascii"), "base64"
    return {
        "id": letter.id,
        "event_id": letter.origin_id,
        "key": letter.key,
        "reason": letter.reason,
        "deliveries": letter.deliveries,
        "data": data,
        "encoding": encoding,
    }
