"""Asyncio durable client sessions: what a session does is `durables.sessions.core`
(shared with the sync client), awaited here, with delivery on a task.

Listeners may be plain objects (`on_event`, `after_region_live`) or have coroutine
methods; both are called from the delivery task.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from contextlib import nullcontext
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from ..ops.flows import Flow
from ..options import SessionOptions, Wait, wait_seconds
from ..records import SessionInfo
from ..session import SessionFront
from ..sessions.core import ALL_KEYS
from ..sessions.delivery import DeliveryLoop

if TYPE_CHECKING:
    from ..events import Event
    from ..io.aio.context import AsyncContext


class AsyncSessionListener(Protocol):
    """What a session calls: every event (`on_event` may be a coroutine function), and
    `after_region_live(channel)` once per channel if the listener has it."""

    def on_event(self, event: Event) -> object: ...


class AsyncSession(SessionFront[Coroutine[Any, Any, dict[str, bytes]]]):
    """A durable client: a queue per interested channel that outlives disconnects.
    Made by `await client.session(...)`; `async with` closes it (keeping it alive)."""

    ctx: AsyncContext

    def __init__(self, ctx: AsyncContext, session_id: str, options: SessionOptions) -> None:
        super().__init__(ctx, session_id, options, lock=nullcontext(), gate=asyncio.Event)
        self.executor = ctx.executor

    async def open(self, wait: Wait = False) -> None:
        """Become the session's live client and create or resume it (`client.session()`;
        `wait` for another client's live lease to lapse, as there)."""
        await self.executor.drive(self.opening(wait_seconds(wait)))

    async def info(self) -> SessionInfo:
        """The session's state and queue (see `Session.info`)."""
        return await self.executor.drive(self.describing())

    async def _connected_for(self, what: str) -> None:
        connected = self.executor.state == "connected"
        await self.executor.drive(self._check_connected(what, connected))

    async def _registering(self, flow: Flow[dict[str, bytes]]) -> dict[str, bytes]:
        await self._connected_for("register interest")
        return await self.executor.drive(flow)

    def add_listener(
        self, channel: str, listener: AsyncSessionListener | Callable[..., Any]
    ) -> None:
        """`listener.on_event(event)` (sync or async; or `listener(event)`, for a function)
        for each event; `after_region_live`."""
        super().add_listener(channel, listener)

    async def ready_for_events(self) -> None:
        """Place the replay markers and start delivering: replay, after_region_live, live."""
        await self._connected_for("get ready for events")
        if self._delivery is not None:
            return
        delivery = self._wired(AsyncDelivery, await self.executor.drive(self.marking()))
        self._delivery = delivery
        delivery.start()

    async def put(self, channel: str, key: str, value: Any) -> str:
        """Publish `value` for `key` and put it in the local cache; returns the event id."""
        await self._connected_for("put")
        return await self.executor.drive(self.putting(channel, key, value))

    async def destroy(self, channel: str, key: str) -> str:
        """Publish a tombstone for `key` and mark it destroyed locally."""
        await self._connected_for("destroy")
        return await self.executor.drive(self.destroying(channel, key))

    async def close(self, keepalive: bool = True) -> None:
        """Disconnect; keepalive=False removes the session at once (see `Session.close`)."""
        if isinstance(self._delivery, AsyncDelivery):
            await self._delivery.close()
        self._delivery = None
        await self.executor.drive(self.closing(keepalive))

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close(keepalive=True)


class AsyncDelivery(DeliveryLoop["AsyncContext"]):
    """The task that feeds one live session's listeners and caches: the delivery loop of
    `durables.sessions.delivery`, awaited."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.executor = self.ctx.executor
        self.runtime = self.ctx.runtime
        self._task: asyncio.Task[None] | None = None
        self._acks: set[asyncio.Task[Any]] = set()

    def start(self) -> None:
        self.runtime.own(self)
        self._task = asyncio.get_running_loop().create_task(
            self.executor.drive(self.running()), name=f"durables-{self.session_id}"
        )

    async def close(self) -> None:
        self.stopping = True
        if self._task is not None and self._task is not asyncio.current_task():
            if self.reading:
                self._task.cancel()  # a blocked read ends at once; nothing half-delivered
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        # a cancelled read may not have carried them: XACK is idempotent
        await self.executor.drive(self.flushing_acks())
        self.runtime.disown(self)

    def ack_event(self, event: Event) -> asyncio.Task[Any]:
        """An ack-required event acknowledged by the application (under way at once)."""
        task = asyncio.get_running_loop().create_task(self.executor.run(self.ack_op(event)))
        self._acks.add(task)  # the loop keeps only a weak reference
        task.add_done_callback(self._acks.discard)
        return task


__all__ = ["ALL_KEYS", "AsyncDelivery", "AsyncSession", "AsyncSessionListener"]
