"""The tasks an asyncio client owns, and the order they stop in (as `durables.io.runtime`).

Subscriptions and session deliveries call listeners; the housekeeper trims channels this
client used; the heartbeat renews every lease (the same `Lease` records as the sync
client, each renewal an `Op`) in one pipeline over an executor of its own. `close()`
stops them in that order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import ChannelNotFoundError, DurablesError
from ...server_health import ServerWatch
from ..leases import Beats, Lease
from ..runtime import MIN_ROUND_S

if TYPE_CHECKING:
    from .executor import AsyncExecutor

log = logging.getLogger(__name__)

RECANCEL_S = 1.0
"""How long `stop` waits for cancelled tasks before it cancels them again."""
STOP_TRIES = 10


async def stop(tasks: list[asyncio.Task[Any]], what: str) -> None:
    """Cancel `tasks` and wait until they end, cancelling again while they run.

    On Python 3.11 a cancel that meets a timeout firing at the same moment inside redis-py
    can be swallowed (it becomes a TimeoutError), and a task's loop then runs on: awaiting
    it once would hang `close()`. After `STOP_TRIES` rounds a task still running is left,
    with a warning, rather than hanging its owner.
    """
    pending = {task for task in tasks if not task.done()}
    for _ in range(STOP_TRIES):
        if not pending:
            return
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=RECANCEL_S)
    if pending:
        log.warning("%s: %d task(s) did not stop when cancelled", what, len(pending))


class AsyncClosable(Protocol):
    async def close(self) -> None: ...


class AsyncHeartbeat(Beats):
    """Renews registered leases every `lease_ms / 3` (or pings) from a task until closed."""

    def __init__(
        self,
        executor: AsyncExecutor,
        lease_ms: int,
        on_failure: Callable[[], Awaitable[None]] | None = None,
        watch: ServerWatch | None = None,
    ) -> None:
        super().__init__(lease_ms, on_failure, nullcontext(), watch)
        self._executor = executor
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        if self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="heartbeat")

    def add(self, lease: Lease) -> None:
        super().add(lease)
        self.start()

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            await stop([self._task], "heartbeat")
        await self._executor.close()

    async def _run(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.interval_s)
            if not self._closed:
                try:
                    await self._executor.drive(self.beating())
                except Exception:  # as the sync heartbeat: the next beat tries again
                    log.exception("heartbeat: a beat failed")


class AsyncHousekeeper:
    """Trims the channels this client used every `interval_s` (at once with 0)."""

    def __init__(self, trim: Callable[[str], Awaitable[object]], interval_s: float) -> None:
        self._trim = trim
        self._interval_s = interval_s
        self._touched: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self._closed = False

    def touch(self, channel: str) -> None:
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        if self._interval_s == 0:
            task = loop.create_task(self._trim_quietly(channel))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)
            return
        self._touched.add(channel)
        if self._task is None:
            self._task = loop.create_task(self._run(), name="housekeeper")

    async def _run(self) -> None:
        while not self._closed:
            await asyncio.sleep(max(MIN_ROUND_S, self._interval_s))
            channels, self._touched = self._touched, set()
            for channel in sorted(channels):
                await self._trim_quietly(channel)

    async def _trim_quietly(self, channel: str) -> None:
        try:
            await self._trim(channel)
        except ChannelNotFoundError:
            pass
        except DurablesError as exc:  # opportunistic: the next round tries again
            log.debug("housekeeping %r failed: %s", channel, exc)
            self._touched.add(channel)

    async def close(self) -> None:
        self._closed = True
        await stop([*self._pending, *([self._task] if self._task else [])], "housekeeping")


class AsyncDeferring(Protocol):
    async def flush_acks(self) -> None: ...


class AsyncAckFlusher:
    """Sends deferred acknowledgements that no read carried out within `interval_s`
    (`ack_flush_interval_s`), each owner's from a task of its own; `close()` sends what is
    left (as `durables.io.runtime.AckFlusher`)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._due: dict[int, tuple[AsyncDeferring, asyncio.Task[None]]] = {}
        self._closed = False

    def schedule(self, owner: AsyncDeferring) -> None:
        """`owner` holds deferred acks: flush them within the interval."""
        if id(owner) in self._due or self._closed:
            return
        task = asyncio.get_running_loop().create_task(self._later(owner))
        self._due[id(owner)] = (owner, task)

    def cancel(self, owner: AsyncDeferring) -> None:
        due = self._due.pop(id(owner), None)
        if due is not None and due[1] is not asyncio.current_task():
            due[1].cancel()

    async def _later(self, owner: AsyncDeferring) -> None:
        await asyncio.sleep(self.interval_s)
        self._due.pop(id(owner), None)
        await self._flush_quietly(owner)

    @staticmethod
    async def _flush_quietly(owner: AsyncDeferring) -> None:
        try:
            await owner.flush_acks()
        except DurablesError as exc:  # the next read carries them, or the close
            log.warning("deferred acknowledgements of %r not sent yet: %s", owner, exc)

    async def close(self) -> None:
        self._closed = True
        due, self._due = list(self._due.values()), {}
        await stop([task for _, task in due], "acknowledgement flushing")
        for owner, _ in due:
            await self._flush_quietly(owner)


class AsyncRuntime:
    """Owns a client's tasks: workers, the ack flusher, the housekeeper, the heartbeat;
    stopped in that order."""

    def __init__(
        self,
        heartbeat: AsyncHeartbeat,
        housekeeper: AsyncHousekeeper,
        acks: AsyncAckFlusher | None = None,
    ) -> None:
        self.heartbeat = heartbeat
        self.housekeeper = housekeeper
        self.acks = acks or AsyncAckFlusher(0.0)
        self._workers: dict[int, AsyncClosable] = {}

    def own(self, worker: AsyncClosable) -> None:
        self._workers[id(worker)] = worker

    def disown(self, worker: AsyncClosable) -> None:
        self._workers.pop(id(worker), None)

    async def close(self) -> None:
        workers = list(self._workers.values())
        self._workers.clear()
        for worker in reversed(workers):
            try:
                await worker.close()
            except DurablesError as exc:
                log.warning("closing %r: %s", worker, exc)
        await self.acks.close()
        await self.housekeeper.close()
        await self.heartbeat.close()


__all__ = [
    "AsyncAckFlusher",
    "AsyncClosable",
    "AsyncDeferring",
    "AsyncHeartbeat",
    "AsyncHousekeeper",
    "AsyncRuntime",
]
