"""Client processes that tests kill for real (kill -9), and waiting out their leases."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def python_child(code: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """Run `code` in a new Python process (text stdin/stdout pipes); on leaving, kill -9
    it if it still runs, reap it and close its pipes."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def first_line(proc: subprocess.Popen[str]) -> str:
    """The next line the child prints, without its newline."""
    assert proc.stdout is not None
    return proc.stdout.readline().rstrip("\n")


def once_free(take: Callable[[], T], busy: type[Exception], timeout: float = 10.0) -> T:
    """`take()` as soon as it stops raising `busy` (a dead holder's lease lapsing)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return take()
        except busy:
            assert time.monotonic() < deadline, f"still {busy.__name__} after {timeout} s"
            time.sleep(0.1)
