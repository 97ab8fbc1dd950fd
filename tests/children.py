"""Client processes that tests kill for real (kill -9), and waiting out their leases."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
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


class Lines:
    """A child's output lines, read on a thread of its own, so a test waits for them with a
    bound instead of blocking on a child that never prints."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self._stdout = proc.stdout
        self._lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self._stdout:
            self._lines.put(line.rstrip("\n"))

    def until(self, done: Callable[[list[str]], bool], timeout: float = 10.0) -> list[str]:
        """Every line so far, once `done(lines)` holds; fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not done(self.seen):
            left = deadline - time.monotonic()
            assert left > 0, f"not seen in {timeout} s; lines: {self.seen}"
            with suppress(queue.Empty):
                self.seen.append(self._lines.get(timeout=left))
        return self.seen
