"""Durable commands: list, inspect, create, and tail one as a consumer."""

from __future__ import annotations

import dataclasses
from typing import cast

import click

import durables

from . import output
from .context import State, json_option, pass_state
from .interrupts import StopRequest, stop_requested

TAIL_CONSUMER = "cli-tail"
STOP_WITHIN_S = 0.5
"""How long `tail` may take to answer Ctrl-C: its fetches wait no longer than this."""


@click.command("durables")
@click.argument("channel_name", metavar="CHANNEL")
@json_option
@pass_state
def list_durables(state: State, channel_name: str, as_json: bool) -> None:
    """List the durables of a channel."""
    infos = state.client().get_channel(channel_name).durables()
    if as_json:
        output.print_json(infos)
        return
    if not infos:
        output.say(f"no durables on channel {channel_name!r}")
        return
    columns = ("durable", "kind", "filter", "depth", "transaction depth", "consumers")
    rows = [(i.name, i.kind, i.filter, i.depth, i.transaction_depth, i.consumers) for i in infos]
    output.show(output.table(f"durables of {channel_name}", columns, rows))


@click.command("inspect")
@click.argument("channel_name", metavar="CHANNEL")
@click.argument("durable_name", metavar="DURABLE")
@json_option
@pass_state
def inspect(state: State, channel_name: str, durable_name: str, as_json: bool) -> None:
    """Show everything about one durable: what `durables durables` lists, and the figures
    the console shows (lag, oldest unacknowledged age, dead letters, counters, consumers)."""
    client = state.client()
    durable = client.get_channel(channel_name).get_durable(durable_name)
    info = durable.info()
    found = client.figures(alert_count=0, channel=channel_name).channels
    figures = next((d for c in found for d in c.durables if d.info.name == durable_name), None)
    record = {**dataclasses.asdict(info), "max_deliveries": durable.spec.max_deliveries}
    if figures is not None:
        record |= {
            "lag": figures.lag,
            "oldest_unacked_age_s": figures.oldest_unacked_age_s,
            "dead_letters": figures.dead_letters,
            "dead_lettered": figures.dead_lettered,
            "redeliveries": figures.redelivered_pending,
            "delivered": figures.delivered,
            "acknowledged": figures.acknowledged,
            "redelivered": figures.redelivered,
            "windows": figures.windows,
            "consumer_details": [dataclasses.asdict(c) for c in figures.consumers],
        }
        if figures.keys is not None:
            record |= {"keys_moving": figures.keys.moving, "keys_waiting": figures.keys.waiting}
    if as_json:
        output.print_json(record)
        return
    shown = {k: v for k, v in record.items() if k not in ("consumer_details", "windows")}
    output.show(
        output.table(
            f"durable {durable_name} on {channel_name}", ("field", "value"), list(shown.items())
        )
    )
    if figures is not None and figures.consumers:
        keyed = figures.keys is not None  # the keys each holds an event of
        columns: tuple[str, ...] = ("consumer", "host", "pid", "window", "held")
        columns += ("keys",) * keyed + ("last seen s", "lease left s")
        rows: list[tuple[object, ...]] = [
            (c.name, c.host, c.pid, c.window, c.held, *(c.keys,) * keyed, c.last_seen_s,
             c.lease_left_s)
            for c in figures.consumers
        ]  # fmt: skip
        output.show(output.table("consumers", columns, rows))


@click.command("create")
@click.argument("channel_name", metavar="CHANNEL")
@click.argument("durable_name", metavar="DURABLE")
@click.option(
    "--kind",
    type=click.Choice(["exclusive", "shared", "serial", "keyed"]),
    help="One consumer in order; many round robin; many in strict order; many, in order "
    "per key (the events' keys), keys in parallel. "
    "[default: the existing durable's kind, else exclusive]",
)
@click.option("--filter", "selector", metavar="F", help="e.g. \"region = 'eu' AND qty > 5\".")
@click.option(
    "--start",
    metavar="S",
    help="earliest, latest, or the id of the first event to deliver; applies when the "
    "durable is created (an existing one keeps its position, with a warning). "
    "[default: earliest]",
)
@json_option
@pass_state
def create(
    state: State,
    channel_name: str,
    durable_name: str,
    kind: str | None,
    selector: str | None,
    start: str | None,
    as_json: bool,
) -> None:
    """Create a durable.

    Creates CHANNEL too if needed. A durable of that name with the same kind and
    filter (by meaning) is kept as it is; one with another kind or filter is a conflict.
    """
    durable = (
        state.client()
        .channel(channel_name)
        .durable(
            durable_name, kind=cast("durables.Kind | None", kind), start=start, filter=selector
        )
    )
    info = durable.info()
    if as_json:
        output.print_json(info)
        return
    where = f" where {info.filter}" if info.filter else ""
    output.say(
        f"durable {info.name!r} on channel {info.channel!r}: {info.kind}{where}, "
        f"starting at {info.start}, depth {info.depth}"
    )


@click.command("tail")
@click.argument("channel_name", metavar="CHANNEL")
@click.argument("durable_name", metavar="DURABLE")
@click.option("-n", "--count", type=click.IntRange(min=1), metavar="N", help="Stop after N events.")
@click.option(
    "--no-ack", is_flag=True, help="Leave events unacknowledged: they are delivered again."
)
@click.option("--name", default=TAIL_CONSUMER, show_default=True, help="Consumer name.")
@json_option
@pass_state
def tail(
    state: State,
    channel_name: str,
    durable_name: str,
    count: int | None,
    no_ack: bool,
    name: str,
    as_json: bool,
) -> None:
    """Print a durable's events as they come.

    Attaches to DURABLE as a consumer and acknowledges what it printed (unless
    --no-ack). Ctrl-C or SIGTERM detaches cleanly within half a second.
    """
    durable = state.client().get_channel(channel_name).get_durable(durable_name)
    with durable.consumer(name, auto_ack=False) as consumer, stop_requested() as stop:
        tailing = _Tail(consumer, ack=not no_ack, as_json=as_json)
        try:
            tailing.run(count, stop)
        finally:  # a second Ctrl-C too: acknowledge what was printed, then detach
            tailing.finish()


class _Tail:
    """Prints what a consumer fetches; acknowledges exactly what was printed."""

    def __init__(self, consumer: durables.Consumer, *, ack: bool, as_json: bool) -> None:
        self.consumer = consumer
        self.ack = ack
        self.as_json = as_json
        self.printed: list[durables.Event] = []
        """Printed and not yet acknowledged."""
        self.unprinted: list[durables.Event] = []
        """Fetched but never printed (past --count, or cut short by Ctrl-C)."""

    def run(self, count: int | None, stop: StopRequest) -> None:
        """Until `count` events were printed or a stop was requested (Ctrl-C, SIGTERM),
        which a fetch answers within `STOP_WITHIN_S`."""
        timeout = min(self.consumer.block_s, STOP_WITHIN_S)
        while not stop.requested and (count is None or count > 0):
            self.unprinted = self.consumer.fetch(timeout=timeout)
            while self.unprinted and not stop.requested and (count is None or count > 0):
                # A second Ctrl-C while an event is being printed leaves it in neither list:
                # neither acknowledged nor handed back as unseen, it comes again flagged as
                # redelivered (it may have been seen).
                event = self.unprinted.pop(0)
                _show(event, self.as_json)
                self.printed.append(event)
                count = None if count is None else count - 1
            self.settle()

    def settle(self) -> None:
        """Acknowledge what was printed: all fetched at once, or one by one if some were not."""
        if not self.ack:
            self.printed.clear()  # --no-ack: they stay pending on the server, not here
            return
        if not self.printed:
            return
        if self.unprinted:
            for event in self.printed:
                event.ack()
        else:
            self.consumer.commit()
        self.printed.clear()

    def finish(self) -> None:
        """Settle, then detach; unprinted events go back as never handed out."""
        try:
            self.settle()
        finally:
            self.consumer.close(unhanded=self.unprinted)


def _show(event: durables.Event, as_json: bool) -> None:
    if as_json:
        output.print_json(output.event_record(event), lines=True)
    else:
        click.echo(output.event_line(event))
