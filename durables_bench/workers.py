"""Timing loops: workers (threads, or asyncio tasks for the peer) that take turns at a
shared count until it reaches a target, a pacer for fixed-rate producers, and a hand-off:
one event at a time to readers blocked on threads of their own."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .results import Rate

STALL_S = 15.0
"""A run whose workers make no progress for this long fails instead of hanging."""

Step = Callable[[], int]
AsyncStep = Callable[[], Awaitable[int]]


class StalledError(RuntimeError):
    """The workers stopped making progress before reaching their target."""


class Tally:
    """How many events all workers handled, and when the last one was."""

    def __init__(self, target: int, on_done: Callable[[], None] | None = None) -> None:
        self.target = target
        self.count = 0
        self.last_progress = time.monotonic()
        self.done_at: float | None = None
        """perf_counter() when the target was reached: the end of the timed window (the
        other workers may still sit in a blocking read that nobody needs any more)."""
        self._on_done = on_done
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        if not n:
            return
        with self._lock:
            self.count += n
            self.last_progress = time.monotonic()
            if self.done_at is None and self.count >= self.target:
                self.done_at = time.perf_counter()
                if self._on_done is not None:
                    self._on_done()

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


def run_workers(
    steps: Sequence[Step], target: int, finish: Callable[[], None] | None = None
) -> Rate:
    """Call every step in its own thread (one step runs inline) until `target` events are
    done. The timed window ends when the target is reached, plus `finish` (which runs
    after the workers stop: final acknowledgements, say)."""
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
    tally.check()
    finishing = time.perf_counter()
    if finish is not None:
        finish()
    seconds = (tally.done_at or finishing) - start + (time.perf_counter() - finishing)
    return Rate(tally.count, seconds)


async def run_tasks(steps: Sequence[AsyncStep], target: int) -> Rate:
    """The asyncio twin of `run_workers`: one task per step; tasks still waiting when the
    target is reached are cancelled."""
    reached = asyncio.Event()
    tally = Tally(target, on_done=reached.set)

    async def work(step: AsyncStep) -> None:
        while tally.running:
            tally.add(await step())

    start = time.perf_counter()
    workers: asyncio.Future[Any] = asyncio.gather(*(work(s) for s in steps))
    waiter: asyncio.Future[Any] = asyncio.ensure_future(reached.wait())
    await asyncio.wait([workers, waiter], return_when=asyncio.FIRST_COMPLETED)
    seconds = (tally.done_at or time.perf_counter()) - start
    waiter.cancel()
    workers.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await workers
    tally.check()
    return Rate(tally.count, seconds)


def batches(total: int, size: int) -> list[int]:
    """`total` split into batch sizes of at most `size`."""
    return [min(size, total - start) for start in range(0, total, size)]


class Pacer:
    """Keeps a producer at `rate` events per second.

    `due(sent)` sleeps until the next event is due and says how many are due by then:
    one while the producer keeps up; more after it fell behind, which the producer
    sends together in one call, so every variant holds the rate.
    """

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.start = time.perf_counter()

    def due(self, sent: int) -> int:
        delay = self.start + sent * self.interval - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        elapsed = time.perf_counter() - self.start
        return max(1, int(elapsed / self.interval) + 1 - sent)


HANDOFF_WAIT_S = 5.0
"""The longest a hand-off waits for its event to be received before it fails."""


class Handoff:
    """Consumers, each blocked in a read on a thread of its own, and a publisher that sends
    one event and waits until one of them has it before it sends the next: the work of
    `durables bench`'s latency scenarios per event, without their pacing and their
    producer process (everything here is one process, so its CPU time is all counted)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.received = threading.Semaphore(0)
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self, reads: list[Callable[[], int]]) -> None:
        def loop(read: Callable[[], int]) -> None:
            while not self.stop.is_set():
                for _ in range(read()):
                    self.received.release()

        self.threads = [threading.Thread(target=loop, args=(r,), daemon=True) for r in reads]
        for thread in self.threads:
            thread.start()

    def step(self, publish: Callable[[], object]) -> Callable[[], None]:
        def step() -> None:
            for i in range(self.n):
                publish()
                if not self.received.acquire(timeout=HANDOFF_WAIT_S):
                    raise RuntimeError(f"event {i} of {self.n} not received")

        return step

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()
