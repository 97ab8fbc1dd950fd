"""Progress bars for long operations, shown only when stdout is a terminal.

Written to a pipe or a file, a command prints exactly what it printed before: the bar
is for people watching, and it leaves the screen when the work is done.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from . import output

Advance = Callable[[int], None]


def on_terminal() -> bool:
    """Whether stdout is a terminal (so a bar is worth drawing)."""
    return sys.stdout.isatty()


@contextmanager
def bar(description: str, total: int | None) -> Iterator[Advance]:
    """A bar counting up to `total` (None: unknown); yields the function that advances it."""
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=output.console(), transient=True) as progress:
        task = progress.add_task(description, total=total)
        yield lambda done: progress.advance(task, done)
