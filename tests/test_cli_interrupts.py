"""Ctrl-C and SIGTERM as a request to stop (`durables_cli.interrupts`), whichever thread of
the process the kernel hands the signal to."""

from __future__ import annotations

import signal
import threading
import time

from .cli_support import interrupts


def test_a_stop_signal_taken_by_another_thread_still_ends_the_sleep() -> None:
    """The kernel may deliver a process's SIGTERM to any of its threads (a client's
    heartbeat); Python runs the handler in the main thread only when that thread next runs,
    so a sleep ended only by the signal's interruption lasted its whole length (a
    `durables housekeep --every 3600` ignored Ctrl-C under load)."""
    parked, done = threading.Event(), threading.Event()

    def helper() -> None:
        parked.set()
        done.wait(30)

    other = threading.Thread(target=helper)
    other.start()
    parked.wait(5)
    assert other.ident is not None
    signal_it = threading.Timer(0.2, signal.pthread_kill, [other.ident, signal.SIGTERM])
    try:
        with interrupts.stop_requested() as stop:
            signal_it.start()
            started = time.monotonic()
            assert stop.sleep(20)
            took = time.monotonic() - started
    finally:
        done.set()
        other.join(5)
        signal_it.join(5)
    assert took < 2, took
