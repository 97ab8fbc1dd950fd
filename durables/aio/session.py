"""Asyncio durable client sessions: the same records, live lease, queues, markers and
delivery cursors (`ops.sessions.SessionCursors`: replay up to the marker, then live) as
`durables.session`, with the round trips awaited and delivery on a task.

Listeners may be plain objects (`on_event`, `after_region_live`) or have coroutine
methods; both are called from the delivery task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from .. import names
from ..cache import LocalCache
from ..errors import (
    ConnectionLostError,
    DurablesError,
    SessionInUseError,
    UnconnectedError,
)
from ..events import check_key, encode_data, encode_event, tombstone
from ..leases import Lease
from ..ops import channels as channel_ops
from ..ops import sessions as ops
from ..records import Interest, SessionInfo, SessionRecord
from ..session import ALL_KEYS, Overflow, SessionState, StateListener, _interest, check_options
from ..session_delivery import DeliveryLoop, as_listener, interest_matches
from . import stores
from .channel import get_channel

if TYPE_CHECKING:
    from ..events import Event
    from .context import AsyncContext

log = logging.getLogger(__name__)


class AsyncSessionListener(Protocol):
    """What a session calls: every event (`on_event` may be a coroutine function), and
    `after_region_live(channel)` once per channel if the listener has it."""

    def on_event(self, event: Event) -> object: ...


class AsyncSession:
    """A durable client: a queue per interested channel that outlives disconnects.
    Made by `await client.session(...)`; `async with` closes it (keeping it alive)."""

    def __init__(
        self,
        ctx: AsyncContext,
        session_id: str,
        timeout: float,
        *,
        max_depth: int | None = None,
        disconnected_max_depth: int | None = None,
        overflow: Overflow = "close",
        recovery_buffer: int | None = None,
        auto_ack: bool = True,
    ) -> None:
        check_options(session_id, timeout, max_depth, disconnected_max_depth, overflow,
                      recovery_buffer)  # fmt: skip
        self.ctx = ctx
        self.id = session_id
        self.token = secrets.token_hex(8)
        self.max_depth = max_depth
        self.disconnected_max_depth = disconnected_max_depth
        self.overflow = overflow
        self.recovery_buffer = recovery_buffer
        self.auto_ack = auto_ack
        self.resumed = False
        self.record = SessionRecord(session_id, int(timeout * 1000), 0, 0)
        self._timeout_ms = int(timeout * 1000)
        self._clock_offset_ms = 0
        self._caches: dict[str, LocalCache] = {}
        self._listeners: dict[str, list[AsyncSessionListener]] = {}
        self._state_listeners: list[StateListener] = []
        self._delivery: AsyncDelivery | None = None
        self._state: SessionState = "disconnected"
        self.markers: dict[str, str] = {}

    async def open(self) -> None:
        """Become the session's live client and create or resume it (`client.session()`)."""
        await self._take_live_lease()
        try:
            self.resumed, self.record = await self._open(self._timeout_ms)
        except BaseException:
            await self._release_live_lease()
            raise
        self._state = "connected"
        self._keep_alive()
        if self.record.interests:
            await self._queues(self._limits())

    def __repr__(self) -> str:
        return f"Session({self.id!r}, resumed={self.resumed}, state={self._state!r})"

    @property
    def state(self) -> SessionState:
        return self._state

    def on_state(self, listener: StateListener) -> None:
        self._state_listeners.append(listener)

    def _set_state(self, new: SessionState) -> None:
        old, self._state = self._state, new
        if old == new:
            return
        # a deliberate close is news, not a warning (an overflow warns where it happens)
        log.log(logging.WARNING if new in ("disconnected", "expired") else logging.INFO,
                "session %r: %s -> %s", self.id, old, new)  # fmt: skip
        for listener in list(self._state_listeners):
            try:
                listener(old, new)
            except Exception:
                log.exception("session state listener failed on %s -> %s", old, new)

    @property
    def discarded(self) -> int:
        return self._delivery.cursors.discarded if self._delivery is not None else 0

    @property
    def connected(self) -> bool:
        return self._state in ("connected", "expired")

    async def info(self) -> SessionInfo:
        """The session's state and queue (see `Session.info`)."""
        depth = in_flight = 0
        limits: list[int] = []
        for queue in await self._queues():
            depth, in_flight = depth + max(0, queue.depth), in_flight + queue.in_flight
            if queue.limit:
                limits.append(queue.limit)
        limit = max(limits) if limits else self.max_depth
        return SessionInfo(self.id, self._state, depth, limit, self._timeout_ms / 1000,
                           in_flight)  # fmt: skip

    def _limits(self) -> str:
        return ops.queue_limits(self.max_depth, self.disconnected_max_depth, self.overflow,
                                self.ctx.lease_ms)  # fmt: skip

    async def _queues(self, limits: str = "") -> list[ops.Queue]:
        live = None if self._state == "disconnected" else True
        channels = list(self.record.interests)
        found = await self.ctx.executor.run_all(
            [ops.queue(self.ctx.keys(c), self.id, limits, live) for c in channels]
        )
        for channel, queue in zip(channels, found, strict=True):
            dropped, closed = ops.overflow_notes(self.id, channel, queue)
            if dropped:
                await self._alert(dropped)
            if closed:
                await self._overflowed(closed)
        return list(found)

    async def _alert(self, message: str) -> None:
        log.warning(message)
        await stores.alert(self.ctx, message, await stores.server_ms(self.ctx), session=self.id)

    async def _overflowed(self, message: str) -> None:
        await self._alert(message)
        with contextlib.suppress(DurablesError):
            await stores.remove(self.ctx, self.record)
        self._set_state("closed")

    # -- the live lease -----------------------------------------------------------------

    async def _take_live_lease(self) -> None:
        op = ops.take_live(self.ctx.namespace, self.id, self.token, self.ctx.lease_ms)
        if not await self.ctx.executor.run(op, retry=False):
            raise SessionInUseError(
                f"session {self.id!r} is live in another client; close it there first, or wait "
                f"{self.ctx.settings.lease_timeout_s:g} s if that client died"
            )

    def _keep_alive(self) -> None:
        renew = ops.touch(self.ctx.namespace, self.id, self.token, self.ctx.lease_ms)
        self.ctx.runtime.heartbeat.add(Lease(self.token, renew, self._lost_connection))

    def _lost_connection(self) -> None:
        if self._state in ("connected", "expired"):
            self._set_state("disconnected")

    async def _release_live_lease(self) -> None:
        self.ctx.runtime.heartbeat.remove(self.token)
        await self.ctx.executor.run(ops.release_live(self.ctx.namespace, self.id, self.token),
                                    retry=False)  # fmt: skip

    async def _open(self, timeout_ms: int) -> tuple[bool, SessionRecord]:
        ctx = self.ctx
        now = await stores.server_ms(ctx)
        self._clock_offset_ms = now - int(time.time() * 1000)
        plan = ops.opening(self.id, await stores.load(ctx, self.id), now, timeout_ms)
        if plan.expired is not None:
            await stores.expire(ctx, plan.expired, now)
        for channel in plan.dropped:
            await stores.drop_interest(ctx, self.id, channel)
        await stores.save(ctx, plan.record)
        return plan.resumed, plan.record

    async def _resume(self) -> None:
        """The server answers again: be the live client again (see `Session._resume`)."""
        if self._state != "disconnected":
            return
        await self._take_live_lease()
        interests = dict(self.record.interests)
        resumed, self.record = await self._open(self._timeout_ms)
        if not resumed:
            for channel, interest in ops.carried_over(interests, self.record).items():
                await self.ctx.executor.run(ops.join(self.ctx.keys(channel), self.id))
                self.record.interests[channel] = interest
            await stores.save(self.ctx, self.record)
        self.resumed = resumed
        self._keep_alive()
        self._set_state("connected" if resumed else "expired")
        await self._queues(self._limits())

    async def _check_connected(self, what: str) -> None:
        if self._state == "disconnected" and self.ctx.executor.state == "connected":
            with contextlib.suppress(DurablesError):
                await self._resume()
        if not self.connected:
            raise UnconnectedError(
                f"cannot {what} while session {self.id!r} is {self._state}; "
                f"the local cache still serves reads"
            )

    # -- interests, listeners, cache ----------------------------------------------------

    @property
    def interests(self) -> dict[str, Interest]:
        return dict(self.record.interests)

    async def register_interest(
        self,
        channel: str,
        keys: Iterable[str] | Any = ALL_KEYS,
        *,
        regex: str | None = None,
        durable: bool = True,
    ) -> dict[str, bytes]:
        """Queue the channel's events for this session (see `Session.register_interest`)."""
        await self._check_connected("register interest")
        interest = _interest(channel, keys, regex, durable)
        ch = await get_channel(self.ctx, channel)
        await self.ctx.executor.run(ops.join(ch.keys, self.id))
        self.record.interests[channel] = interest
        await stores.save(self.ctx, self.record)
        if self.max_depth is not None:
            await self.ctx.executor.run(ops.queue(ch.keys, self.id, self._limits(), True))
        values = await ch.last_values()
        response = {key: value for key, value in values.items() if interest_matches(interest, key)}
        self.cache(channel).apply_response(response)
        return {key: data for key, (_, data) in response.items()}

    def add_listener(
        self, channel: str, listener: AsyncSessionListener | Callable[..., Any]
    ) -> None:
        """`listener.on_event(event)` (sync or async; or `listener(event)`, for a function)
        for each event; `after_region_live`."""
        self._listeners.setdefault(channel, []).append(as_listener(listener))

    def cache(self, channel: str) -> LocalCache:
        return self._caches.setdefault(channel, LocalCache(channel))

    async def ready_for_events(self) -> None:
        """Place the replay markers and start delivering: replay, after_region_live, live."""
        await self._check_connected("get ready for events")
        if self._delivery is not None:
            return
        for channel in self.record.interests:
            self.markers[channel] = await self.ctx.executor.run(
                ops.place_marker(self.ctx.keys(channel), self.id)
            )
        self._delivery = AsyncDelivery(self, dict(self.record.interests))
        self._delivery.start()

    # -- updates --------------------------------------------------------------------------

    async def put(self, channel: str, key: str, value: Any) -> str:
        """Publish `value` for `key` and put it in the local cache; returns the event id."""
        await self._check_connected("put")
        names.channel_name(channel)
        limit = self.ctx.settings.max_payload_bytes
        event_id = await self._publishing(channel, encode_event(value, key, None, limit))
        self.cache(channel).put(key, encode_data(value), event_id)
        return event_id

    async def destroy(self, channel: str, key: str) -> str:
        """Publish a tombstone for `key` and mark it destroyed locally."""
        await self._check_connected("destroy")
        names.channel_name(channel)
        event_id = await self._publishing(channel, tombstone(check_key(key)))
        self.cache(channel).destroy(key)
        return event_id

    async def _publishing(self, channel: str, parts: Sequence[bytes]) -> str:
        ctx, k = self.ctx, self.ctx.keys(channel)
        try:
            await ctx.executor.run_all(channel_ops.ensure(k, {}, int(time.time() * 1000)),
                                       retry=False)  # fmt: skip
            return (await stores.publish_encoded(ctx, k, 1, parts, retry=False))[0]
        except ConnectionLostError as exc:
            self._lost_connection()
            raise UnconnectedError(f"session {self.id!r} lost its connection: {exc}") from exc

    # -- closing --------------------------------------------------------------------------

    async def close(self, keepalive: bool = True) -> None:
        """Disconnect; keepalive=False removes the session at once (see `Session.close`)."""
        if self._delivery is not None:
            await self._delivery.close()
            self._delivery = None
        was_connected = self.connected
        self._set_state("closed")
        if not was_connected:
            return
        try:
            if keepalive:
                for interest in [i for i in self.record.interests.values() if not i.durable]:
                    await stores.drop_interest(self.ctx, self.id, interest.channel)
                    del self.record.interests[interest.channel]
                self.record.disconnected_ms = await stores.server_ms(self.ctx)
                await stores.save(self.ctx, self.record)
            else:
                await stores.remove(self.ctx, self.record)
        finally:
            with contextlib.suppress(DurablesError):
                await self._release_live_lease()

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close(keepalive=True)


class AsyncDelivery(DeliveryLoop):
    """The task that feeds one live session's listeners and caches: the delivery loop of
    `durables.session_delivery`, awaited."""

    def __init__(self, session: AsyncSession, interests: dict[str, Interest]) -> None:
        super().__init__(
            session.ctx, session.id, interests, session.markers,
            lambda channel: list(session._listeners.get(channel, ())), session.cache,
            outage=session._lost_connection, resume=session._resume, queue_gone=session._queues,
            batch=session.recovery_buffer, auto_ack=session.auto_ack,
            clock_offset_ms=session._clock_offset_ms,
        )  # fmt: skip
        self.executor = session.ctx.executor
        self.runtime = session.ctx.runtime
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._acks: set[asyncio.Task[Any]] = set()

    def stopped(self) -> bool:
        return self._stop.is_set()

    def start(self) -> None:
        self.runtime.own(self)
        self._task = asyncio.get_running_loop().create_task(
            self.executor.drive(self.running()), name=f"durables-{self.session_id}"
        )

    async def close(self) -> None:
        self._stop.set()
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
