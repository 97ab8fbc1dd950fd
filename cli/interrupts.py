"""Ctrl-C and SIGTERM as a request to stop at the next safe point.

Python's own Ctrl-C raises KeyboardInterrupt wherever the main thread happens to be:
halfway through a command being packed or sent, or a reply being read. A `durables
tail` died of SIGSEGV that way, inside hiredis's C packer. Commands that run until
stopped ask instead, between steps, whether a stop was requested, and are woken only
where they sleep; a second Ctrl-C ends them at once, for whoever cannot wait.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
SLICE_S = 0.25
"""The longest a stop waits for a sleep (`StopRequest.sleep`)."""


class _Woken(KeyboardInterrupt):
    """Raised by the handler into `StopRequest.sleep` only; a KeyboardInterrupt, so that
    one raised just as the sleep ends is still taken as the stop it is."""


class StopRequest:
    """Whether a stop was requested; set by the handler, never raised mid-command.

    The handler sets a plain attribute: a `threading.Event` would deadlock if the signal
    came while the main thread held the event's own lock."""

    def __init__(self) -> None:
        self.requested = False
        self._sleeping = False

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt  # the second Ctrl-C
        self.requested = True
        if self._sleeping:
            raise _Woken

    def sleep(self, seconds: float) -> bool:
        """Sleep `seconds` or until a stop is requested; whether one was.

        In slices: the kernel may deliver the signal to another thread of the process (the
        client's heartbeat), and Python runs the handler in the main thread only when it
        next runs: a sleep woken by the signal alone would then last its whole length."""
        deadline = time.monotonic() + seconds
        try:
            self._sleeping = True
            while not self.requested:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                time.sleep(min(left, SLICE_S))
        except _Woken:
            pass
        finally:
            self._sleeping = False
        return self.requested


@contextmanager
def stop_requested() -> Iterator[StopRequest]:
    """A `StopRequest` that the first Ctrl-C or SIGTERM while the block runs sets; a
    second Ctrl-C ends the block at once (its KeyboardInterrupt goes no further: the
    block's own `finally` clauses run, and the command ends as stopped).

    Outside the main thread (a command run in-process by a test's thread) no handler
    can be installed: the block runs until it ends by itself."""
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {signum: signal.signal(signum, stop.on_signal) for signum in STOP_SIGNALS}
    try:
        yield stop
    except KeyboardInterrupt:
        pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
