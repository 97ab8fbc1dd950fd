"""Timing loops: workers (threads, or asyncio tasks for the peer) that take turns at a
shared count until it reaches a target, and a pacer for fixed-rate producers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence

from .results import Rate

STALL_S = 15.0
"""A run whose workers make no progress for this long fails instead of hanging."""

Step = Callable[[], int]
AsyncStep = Callable[[], Awaitable[int]]


class StalledError(RuntimeError):
    """The workers stopped making progress before reaching their target."""


class Tally:
    """How many events all workers handled, and when the last one was."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.count = 0
        self.last_progress = time.monotonic()
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        if n:
            with self._lock:
                self.count += n
                self.last_progress = time.monotonic()

    @property
    def done(self) -> bool:
        return self.count >= self.target

    @property
    def stalled(self) -> bool:
        return time.monotonic() - self.last_progress > STALL_S

    @property
    def running(self) -> bool:
        return not self.done and not self.stalled

    def check(self) -> None:
        if not self.done:
            raise StalledError(f"stalled at {self.count} of {self.target} events")


def run_workers(steps: Sequence[Step], target: int, finish: Callable[[], None] = int) -> Rate:
    """Call every step in its own thread (one step runs inline) until `target` events are
    done; `finish` runs inside the timed window after the workers stop."""
    tally = Tally(target)
    errors: list[BaseException] = []

    def work(step: Step) -> None:
        try:
            while tally.running:
                tally.add(step())
        except BaseException as exc:
            errors.append(exc)
            tally.last_progress = 0.0  # stops the others too

    start = time.perf_counter()
    if len(steps) == 1:
        work(steps[0])
    else:
        threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in steps]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    finish()
    seconds = time.perf_counter() - start
    tally.check()
    return Rate(tally.count, seconds)


async def run_tasks(steps: Sequence[AsyncStep], target: int) -> Rate:
    """The asyncio twin of `run_workers`: one task per step."""
    tally = Tally(target)

    async def work(step: AsyncStep) -> None:
        while tally.running:
            tally.add(await step())

    start = time.perf_counter()
    await asyncio.gather(*(work(s) for s in steps))
    seconds = time.perf_counter() - start
    tally.check()
    return Rate(tally.count, seconds)


def batches(total: int, size: int) -> list[int]:
    """`total` split into batch sizes of at most `size`."""
    return [min(size, total - start) for start in range(0, total, size)]


class Pacer:
    """Keeps a loop at `rate` per second: `wait(i)` sleeps until event i is due.

    A producer that falls behind sends at once (no catching up by skipping), so
    the achieved rate is reported beside the latencies.
    """

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.start = time.perf_counter()

    def wait(self, i: int) -> None:
        delay = self.start + i * self.interval - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
