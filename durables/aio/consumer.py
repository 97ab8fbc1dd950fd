"""The asyncio consumer (`fetch`, `commit`, `rollback`, `async for`) and subscription
(a listener, sync or async, called from a task). The bookkeeping of what was handed out
is `durables.consumer.Consumer`'s (`readers.fetching.Fetching`), and so are the readers:
this consumer awaits the flows the sync one drives blocking.

`event.ack()` and `event.rollback()` change the reader's state at once and start the
round trip as a task: awaiting the returned task waits for it, and a sync listener that
does not await still gets its ack sent, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..errors import DurablesError
from ..readers.fetching import Fetching, Flusher, idle_seconds, time_left

if TYPE_CHECKING:
    from ..events import Event
    from ..io.aio.context import AsyncContext
    from ..io.aio.runtime import AsyncRuntime
    from ..ops.base import Op
    from ..readers.base import Reader

log = logging.getLogger(__name__)
AsyncListener = Callable[["Event"], "Awaitable[object] | object"]


class AsyncConsumer(Fetching):
    """A consumer of a durable: attached by `await` or `async with`, until `close()`."""

    reader: Reader[AsyncContext]

    def __init__(
        self,
        reader: Reader[AsyncContext],
        *,
        auto_ack: bool,
        label: str,
        block_s: float,
        acks: Flusher | None = None,
    ) -> None:
        super().__init__(reader, auto_ack=auto_ack, label=label, block_s=block_s, acks=acks)
        self._executor = reader.ctx.executor
        self._attached = False
        self._sending: asyncio.Lock | None = None
        self._turn = asyncio.Lock()
        """Held by the fetch under way: tasks that fetch from this consumer take turns."""
        self._tasks: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"AsyncConsumer({self.label}, auto_ack={self.auto_ack})"

    async def attach(self) -> AsyncConsumer:
        """Attach (once): the dispatcher deals to this consumer from now on."""
        if not self._attached:
            await self._executor.drive(self.reader.attaching())
            self._attached = True
        return self

    def __await__(self) -> Generator[Any, None, AsyncConsumer]:
        return self.attach().__await__()

    async def fetch(self, timeout: float = 1.0) -> list[Event]:
        """The next events (waiting up to `timeout` seconds); [] if none came. With auto-ack,
        the events of the previous fetch are acknowledged first. Tasks that fetch from one
        consumer take turns: each waits (within its timeout) for the fetch under way to
        return, so every event goes to one of them, once."""
        started = self._fetch_begins(timeout)
        turn = self._turn
        if turn.locked():
            try:
                async with asyncio.timeout(timeout):
                    await turn.acquire()
            except TimeoutError:
                return []
        else:
            await turn.acquire()  # free: taken at once
        try:
            return await self._executor.drive(self.fetching(time_left(timeout, started)))
        finally:
            turn.release()

    def __aiter__(self) -> AsyncIterator[Event]:
        """Events one by one, waiting as long as it takes; stop by breaking out or closing
        (`events(idle_timeout=)` also stops when none comes for a while)."""
        return self.events()

    async def events(self, idle_timeout: float | None = None) -> AsyncIterator[Event]:
        """Events one by one (`async for event in consumer.events(idle_timeout=5)`), until
        the consumer closes or, with `idle_timeout`, no event has come for that many
        seconds: a worker that should stop when idle needs no fetch loop of its own."""
        idle_s = idle_seconds(idle_timeout)
        idle_since = time.monotonic()
        while not self._closed:
            wait = self.block_s if idle_s is None else idle_since + idle_s - time.monotonic()
            if wait <= 0:
                return
            events = await self.fetch(timeout=min(wait, self.block_s))
            for event in events:
                yield event
            if events:
                idle_since = time.monotonic()

    async def commit(self) -> None:
        """Acknowledge every fetched event not yet acknowledged or rolled back."""
        self._check_open()
        await self._send(self._commit_ops(defer=self._acks is not None))
        self._deferred()

    async def rollback(self) -> None:
        """Hand back every fetched event not yet acknowledged."""
        self._check_open()
        await self._send(self._rollback_ops(None))

    def ack_event(self, event: Event) -> asyncio.Task[None]:
        self._check_open()
        ops = self._ack_ops(event)
        self._deferred()
        return self._start(ops)

    async def flush_acks(self) -> None:
        """Send the acknowledgements waiting for the next read (`ack_flush_interval_s`)."""
        if not self._closed:
            await self._send(self.reader.flush_ops())

    def rollback_event(self, event: Event, delay_s: float = 0.0) -> asyncio.Task[None]:
        self._check_open()
        return self._start(self._rollback_ops([event], delay_s))

    def _start(self, ops: list[Op[Any]]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(self._send(ops))
        self._tasks.add(task)  # the loop keeps only a weak reference
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)
        return task

    async def _send(self, ops: list[Op[Any]], *, retry: bool = True) -> None:
        """What the reader's state change made, sent after it: acks and rollbacks go out
        one after the other, in the order they were made."""
        if not ops:
            return
        if self._sending is None:
            self._sending = asyncio.Lock()
        async with self._sending:
            await self._executor.drive(self.reader.sending(ops, retry=retry))

    async def close(self, *, clean: bool = True, unhanded: Sequence[Event] = ()) -> None:
        """Detach. A clean close with auto-ack acknowledges what was fetched."""
        if self._closed:
            return
        if self._acks is not None:
            self._acks.cancel(self)  # the release sends the deferred acknowledgements
        try:
            if self._sending is not None:
                async with self._sending:
                    pass  # acks under way go first
            if clean and self.auto_ack and self._outstanding:
                await self._send(self._commit_ops(defer=False), retry=False)
        finally:
            self._closed = True
            if self._attached:
                await self._executor.drive(self.reader.releasing(unhanded))

    async def __aenter__(self) -> AsyncConsumer:
        return await self.attach()

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close(clean=e is None)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("acknowledging failed: %s", task.exception())


class AsyncSubscription:
    """Feeds a durable's events to `listener(event)` (a function or a coroutine function)
    from a task until `close()`; the same rules as `durables.Subscription`."""

    def __init__(
        self, consumer: AsyncConsumer, listener: AsyncListener, runtime: AsyncRuntime | None
    ) -> None:
        self.consumer = consumer
        self.listener = listener
        self.error: BaseException | None = None
        self._runtime = runtime
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> AsyncSubscription:
        if self._runtime is not None:
            self._runtime.own(self)
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"durables-{self.consumer.label}"
        )
        return self

    @property
    def closed(self) -> bool:
        return self._task is None or self._task.done()

    async def _run(self) -> None:
        unhanded: list[Event] = []
        try:
            while not self._stop.is_set() and self.error is None:
                events = await self.consumer.fetch(self.consumer.block_s)
                unhanded = await self._deliver(events)
        except DurablesError as exc:
            self.error = exc
            log.error("subscription on %s stopped: %s", self.consumer.label, exc)
        except Exception as exc:  # a bug: said loudly and kept, never a silent dead listener
            self.error = exc
            log.exception("subscription on %s stopped by an unexpected error", self.consumer.label)
        finally:
            try:
                await self.consumer.close(unhanded=unhanded)
            except Exception as exc:  # closing is best effort: the lease lapses otherwise
                log.error("closing %r failed: %s", self.consumer, exc)
            if self._runtime is not None:
                self._runtime.disown(self)

    async def _deliver(self, events: list[Event]) -> list[Event]:
        for i, event in enumerate(events):
            if self._stop.is_set():
                return events[i:]
            try:
                result = self.listener(event)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                log.exception("listener failed on event %s; rolling it back", event.id)
                await event.rollback()
                if self.consumer.reader.stops_on_error:
                    self.error = exc
                    return events[i + 1 :]
        return []

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait for the subscription to end; True if it has."""
        if self._task is None:
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        return self._task.done()

    async def close(self) -> None:
        """Stop delivering, acknowledge what was processed (auto-ack) and detach."""
        self._stop.set()
        if self._task is not None and self._task is not asyncio.current_task():
            await asyncio.shield(self._task)

    async def __aenter__(self) -> AsyncSubscription:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


__all__ = ["AsyncConsumer", "AsyncListener", "AsyncSubscription"]
