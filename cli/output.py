"""Presentation: rich tables for people, JSON for machines, one line per event."""

from __future__ import annotations

import base64
import dataclasses
import json
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click
from rich.console import Console, RenderableType
from rich.table import Table

import durables

from . import exits

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

PIPE_WIDTH = 200
"""Width of tables written to a pipe or file, where rich would otherwise assume 80."""


def console(*, err: bool = False) -> Console:
    """A console on the current stdout (or stderr); wide when not a terminal."""
    stream = sys.stderr if err else sys.stdout
    width = None if stream.isatty() else PIPE_WIDTH
    return Console(file=stream, width=width, highlight=False)


def show(renderable: RenderableType) -> None:
    console().print(renderable)


def jsonable(value: object) -> object:
    """Dataclasses as dicts, tuples as lists, paths and datetimes as strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def print_json(value: object, *, lines: bool = False) -> None:
    """Pretty JSON, or one compact line (for streams such as `tail --json`)."""
    if lines:
        click.echo(json.dumps(jsonable(value), separators=(",", ":")))
    else:
        click.echo(json.dumps(jsonable(value), indent=2))


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> Table:
    """A table whose cells are shown as text; None shows as a dim dash."""
    grid = Table(title=title, title_justify="left")
    for name in columns:
        grid.add_column(name, no_wrap=True)
    for row in rows:
        grid.add_row(*(cell(value) for value in row))
    return grid


def fields_table(title: str, record: DataclassInstance) -> Table:
    """Every field of a dataclass instance, one row each."""
    rows = [(f.name, getattr(record, f.name)) for f in dataclasses.fields(record)]
    return table(title, ("field", "value"), rows)


def show_record(title: str, record: DataclassInstance, as_json: bool) -> None:
    """One record: as JSON for machines, or a table of its fields for people."""
    if as_json:
        print_json(record)
    else:
        show(fields_table(title, record))


def cell(value: object) -> str:
    if value is None:
        return "[dim]-[/dim]"
    if isinstance(value, tuple | list):
        return ", ".join(str(v) for v in value) or "[dim]-[/dim]"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return escape(str(value))


def escape(text: str) -> str:
    """Text shown as is, not read as rich markup."""
    return text.replace("[", r"\[")


def say(message: str) -> None:
    """A line for people on stdout."""
    click.echo(message)


def fail(message: str, code: int) -> NoReturn:
    """Print `error: message` on stderr and end the command with `code`."""
    click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(code)


def confirm(question: str, yes: bool, nothing_done: str) -> None:
    """Go on if `--yes` was given or the user agrees; otherwise end with ABORTED."""
    if yes:
        return
    try:
        agreed = click.confirm(question, default=False)
    except click.Abort:  # end of input: no answer is not a yes
        agreed = False
    if not agreed:
        click.echo(f"aborted: {nothing_done}", err=True)
        raise click.exceptions.Exit(exits.ABORTED)


def payload(data: bytes) -> str:
    """The payload as text when it is printable UTF-8, else as a bytes literal."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return repr(data)
    return text if text.isprintable() else repr(data)


def event_line(event: durables.Event) -> str:
    """`ID [key=K] [k=v ...] PAYLOAD` on one line."""
    parts = [event.id]
    if event.key is not None:
        parts.append(f"key={event.key}")
    parts.extend(f"{name}={json.dumps(value)}" for name, value in event.properties.items())
    if event.redelivered:
        parts.append(f"(redelivered x{event.redelivery_count})")
    parts.append(payload(event.data))
    return "  ".join(parts)


def event_record(event: durables.Event) -> dict[str, object]:
    """An event as JSON: the payload as UTF-8 text where it is, else base64."""
    try:
        data, encoding = event.data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        data, encoding = base64.b64encode(event.data).decode("ascii"), "base64"
    return {
        "id": event.id,
        "channel": event.channel,
        "key": event.key,
        "properties": event.properties,
        "timestamp": event.timestamp.isoformat(),
        "redelivery_count": event.redelivery_count,
        "data": data,
        "encoding": encoding,
    }
