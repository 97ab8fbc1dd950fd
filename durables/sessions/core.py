"""What a durable client session does, for both clients (GemFire's durable clients).

Opening or resuming a session, its live lease, its queues and their limits, interests,
publishing through it, resuming after an outage, closing: each a sequence of round trips
with decisions between them, written once as flows (`ops.flows`). `durables.Session`
drives them blocking, `durables.aio.AsyncSession` awaiting; each adds only its delivery
(a thread or a task over `sessions.delivery.DeliveryLoop`) and its front methods.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from .. import names
from ..cache import LocalCache
from ..errors import (
    AccessDeniedError,
    ChannelNotFoundError,
    ConfigError,
    ConnectionLostError,
    DurablesError,
    SessionInUseError,
    UnconnectedError,
)
from ..events import Batch, Encoded, check_key, encode_data, encode_event, tombstone
from ..io.leases import Lease, waiting_out
from ..ops import channels as channel_ops
from ..ops import sessions as ops
from ..ops.flows import Flow, call, run, send
from ..ops.sessions import interest_matches
from ..options import Overflow, SessionOptions
from ..publishing import publish_encoded
from ..records import Interest, SessionInfo, SessionRecord
from . import store
from .delivery import DeliveryLoop, as_listener

if TYPE_CHECKING:
    from ..io.context import BaseContext

D = TypeVar("D", bound=DeliveryLoop[Any])
log = logging.getLogger("durables.session")


class _AllKeys:
    """Interest in every key of a channel."""

    def __repr__(self) -> str:
        return "ALL_KEYS"


ALL_KEYS: Any = _AllKeys()


SessionState = Literal["connected", "disconnected", "expired", "closed"]
StateListener = Callable[[str, str], object]


class Gate(Protocol):
    """What a second resumer waits on (`threading.Event`, `asyncio.Event`)."""

    def set(self) -> None: ...

    def wait(self) -> Any: ...


class SessionCore:
    """A durable client: a queue per interested channel that outlives disconnects.

    `state` is "connected", "disconnected" (the connection broke: the client retries on
    its own and the server keeps the queue for `timeout` seconds), "expired" (the
    keep-alive passed while away, so a new session with the same interests was opened)
    or "closed". `lock` guards the state (the sync session's delivery thread resumes it
    while the application calls it) and is never held across a round trip; `gate()` makes
    what a second resumer waits on while one resumes (a `threading.Event` or an
    `asyncio.Event`: `wait()` blocks or is awaited, `set()` ends it).
    """

    def __init__(
        self,
        ctx: BaseContext,
        session_id: str,
        options: SessionOptions,
        *,
        lock: AbstractContextManager[Any],
        gate: Callable[[], Gate],
    ) -> None:
        names.session_id(session_id)  # the options were checked when made
        self.options = options
        self.ctx: BaseContext = ctx
        self.id = session_id
        self.token = secrets.token_hex(8)
        self.max_depth = options.max_depth
        self.disconnected_max_depth = options.disconnected_max_depth
        self.overflow = options.overflow
        self.recovery_buffer = options.recovery_buffer
        self.auto_ack = options.auto_ack
        self.replicated = options.replicated
        """Events are delivered once this many replicas hold them (`replicated=N`)."""
        self.resumed = False
        self.record = SessionRecord(session_id, options.timeout_ms, 0, 0)
        self._timeout_ms = options.timeout_ms
        self._clock_offset_ms = 0
        self._caches: dict[str, LocalCache] = {}
        self._listeners: dict[str, tuple[Any, ...]] = {}
        """Replaced, never changed in place: the delivery iterates them without a copy."""
        self._listeners_lock = threading.Lock()
        self._state_listeners: list[StateListener] = []
        self._delivery: DeliveryLoop[Any] | None = None
        self._state: SessionState = "disconnected"
        self.error: BaseException | None = None
        """Why the session ended by itself ("closed"), when the server refused it (as an
        ACL narrowed under it) or its delivery failed; None otherwise."""
        self._lock = lock
        self._gate = gate
        self._resume_under_way: Gate | None = None
        self.markers: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"Session({self.id!r}, resumed={self.resumed}, state={self._state!r})"

    def opening(self, wait_s: float = 0.0) -> Flow[None]:
        """Become the session's live client (waiting up to `wait_s` for another client's
        live lease to lapse) and create or resume it."""
        yield from waiting_out(self._take_live_lease, wait_s, self.ctx.clock, self.ctx.pause)
        try:
            self.resumed, self.record = yield from self._open(self._timeout_ms)
            if self.resumed and (yield from store.closed_while_away(self.ctx, self.record)):
                # GemFire's durable clients: as after a timeout, "treat it as a new client"
                self.resumed, self.record = yield from self._open(self._timeout_ms)
        except BaseException:
            yield from self._release_live_lease()
            raise
        self._state = "connected"
        self._keep_alive()
        if self.record.interests:
            yield from self._queues(self._limits())

    # -- state ----------------------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        return self._state

    def on_state(self, listener: StateListener) -> None:
        """Call `listener(old, new)` at every change of `state`."""
        self._state_listeners.append(listener)

    def _set_state(self, new: SessionState) -> None:
        with self._lock:
            old, self._state = self._state, new
        if old == new:
            return
        # a deliberate close is news, not a warning (an overflow warns where it happens)
        log.log(
            logging.WARNING if new in ("disconnected", "expired") else logging.INFO,
            "session %r: %s -> %s",
            self.id,
            old,
            new,
        )
        for listener in list(self._state_listeners):
            try:
                listener(old, new)
            except Exception:
                log.exception("session state listener failed on %s -> %s", old, new)

    @property
    def discarded(self) -> int:
        """Events read again after an outage that the listeners already had (not redelivered)."""
        return self._delivery.cursors.discarded if self._delivery is not None else 0

    @property
    def connected(self) -> bool:
        """True while this client is the session's live client and the server answers."""
        return self._state in ("connected", "expired")

    def describing(self) -> Flow[SessionInfo]:
        """The session's state and queue: events not yet acknowledged over its channels
        (`depth`), of which sent and not yet acknowledged (`in_flight`), and the queue limit
        in force (`max_depth` while connected; the larger `disconnected_max_depth` while
        away and after, until the queue drained to 80 % of `max_depth`)."""
        depth = in_flight = 0
        limits: list[int] = []
        for queue in (yield from self._queues(depth=True)):
            depth, in_flight = depth + max(0, queue.depth), in_flight + queue.in_flight
            if queue.limit:
                limits.append(queue.limit)
        limit = max(limits) if limits else self.max_depth
        return SessionInfo(self.id, self._state, depth, limit, self._timeout_ms / 1000, in_flight)

    def _limits(self) -> str:
        """The queue limits as `session_queue.lua` stores them, or '-' for none."""
        return ops.queue_limits(
            self.max_depth, self.disconnected_max_depth, self.overflow, self.ctx.lease_ms
        )

    def _queues(self, limits: str = "", depth: bool = False) -> Flow[list[ops.Queue]]:
        """Each interested channel's queue (setting `limits` when given; its depth counted
        when `depth`), reporting what an overflow did: drops are logged and alerted; a
        closed queue closes the session."""
        live = None if self._state == "disconnected" else True
        found, closed = yield from store.looking(self.ctx, self.record, limits, live, depth)
        if closed:
            yield from self._overflowed(closed)
        return found

    def _overflowed(self, message: str) -> Flow[None]:
        """An overflow with overflow='close': the session is closed, its queues discarded."""
        yield from store.warn(self.ctx, message, self.id)
        with contextlib.suppress(DurablesError):
            yield from store.remove(self.ctx, self.record)
        self._set_state("closed")

    def away(self) -> bool:
        """Not live: the connection broke, or the heartbeat found the live lease gone (this
        client was stopped past it); `resuming` makes it live again."""
        return self._state == "disconnected"

    def queue_gone(self) -> Flow[bool]:
        """The delivery found a queue gone: an overflow closed the session, or a channel was
        deleted (False: the delivery stops), or the session expired while this client was
        stopped past its keep-alive, as by a long pause, with the connection intact (True:
        it is away, and comes back as after an outage past the keep-alive, anew with the
        same interests)."""
        yield from self._queues()
        if self._state == "closed" or (yield from store.load(self.ctx, self.id)) is not None:
            return False
        self.lost_connection()
        return True

    # -- being the one live client of the session ------------------------------------

    def _take_live_lease(self) -> Flow[None]:
        op = ops.take_live(self.ctx.namespace, self.id, self.token, self.ctx.lease_ms)
        if left_ms := (yield from run(op, retry=False)):
            raise SessionInUseError.live_elsewhere(self.id, left_ms / 1000)

    def _keep_alive(self) -> None:
        renew = ops.touch(self.ctx.namespace, self.id, self.token, self.ctx.lease_ms)
        self.ctx.runtime.heartbeat.add(Lease(self.token, renew, self.lost_connection, self.ended))

    def ended(self, error: BaseException) -> None:
        """The server refused the session (as an ACL narrowed under it), or its delivery
        stopped on an error: it ends "closed", with the error in `error` (as a
        subscription's in `sub.error`). Its live lease lapses by itself."""
        if self._state == "closed":
            return
        self.error = error
        self.ctx.runtime.heartbeat.remove(self.token)
        self._set_state("closed")

    def lost_connection(self) -> None:
        """The connection broke, or the heartbeat found the live lease gone (this client
        was away past it)."""
        if self._state in ("connected", "expired"):
            self._set_state("disconnected")

    def _release_live_lease(self) -> Flow[None]:
        self.ctx.runtime.heartbeat.remove(self.token)
        yield from run(ops.release_live(self.ctx.namespace, self.id, self.token), retry=False)

    def _open(self, timeout_ms: int) -> Flow[tuple[bool, SessionRecord]]:
        ctx = self.ctx
        now = yield from store.server_ms(ctx)
        self._clock_offset_ms = now - int(time.time() * 1000)
        plan = ops.opening(self.id, (yield from store.load(ctx, self.id)), now, timeout_ms)
        if plan.expired is not None:
            yield from store.expire(ctx, plan.expired, now)
        for channel in plan.dropped:
            yield from store.drop_interest(ctx, self.id, channel)
        yield from store.save(ctx, plan.record)
        return plan.resumed, plan.record

    def resuming(self) -> Flow[None]:
        """The server answers again: be the live client again, and go on with the same
        session if its keep-alive has not passed, else with a new one with the same
        interests (Diffusion's reconnection rule: "a normal new connection ... with the same
        topic set"). If another client opened the session meanwhile, it is that client's: this
        one is
        closed (`SessionInUseError`). A second resumer (the delivery and the application at
        once) waits for the first (and tries itself if that one failed), with no lock held
        across the round trips."""
        while True:
            with self._lock:
                if self._state != "disconnected":
                    return
                under_way = self._resume_under_way
                if under_way is None:
                    self._resume_under_way = done = self._gate()
                    break
            yield from call(under_way.wait)
        try:
            resumed = yield from self._resume()
            self._set_state("connected" if resumed else "expired")
        finally:
            with self._lock:
                self._resume_under_way = None
            done.set()
        yield from self._queues(self._limits())

    def _resume(self) -> Flow[bool]:
        """Be the live client again, of the same session or of a new one with the same
        interests; whether it is the same."""
        try:
            yield from self._take_live_lease()
        except SessionInUseError as exc:  # opened by another client while this one was away
            self.ctx.runtime.heartbeat.remove(self.token)
            self.error = exc
            self._set_state("closed")
            raise
        interests = dict(self.record.interests)
        resumed, self.record = yield from self._open(self._timeout_ms)
        if not resumed:
            for channel, interest in ops.carried_over(interests, self.record).items():
                yield from run(ops.join(self.ctx.keys(channel), self.id))
                self.record.interests[channel] = interest
            yield from store.save(self.ctx, self.record)
        self.resumed = resumed
        self._keep_alive()
        return resumed

    def _check_connected(self, what: str, server_connected: bool) -> Flow[None]:
        if self._state == "disconnected" and server_connected:
            try:  # back without a delivery running
                yield from self.resuming()
            except AccessDeniedError as exc:
                self.ended(exc)
            except DurablesError:
                pass
        if not self.connected:
            why = f" ({self.error})" if self.error is not None else ""
            raise UnconnectedError(
                f"cannot {what} while session {self.id!r} is {self._state}{why}; "
                f"the local cache still serves reads"
            ) from self.error

    # -- interests, listeners, cache --------------------------------------------------

    @property
    def interests(self) -> dict[str, Interest]:
        return dict(self.record.interests)

    def registering(
        self, channel: str, keys: Iterable[str] | Any, regex: str | None, durable: bool
    ) -> Flow[dict[str, bytes]]:
        """Queue the channel's events (for `keys`, or keys matching `regex`) for this session.

        A durable interest keeps queuing while the session is away; a non-durable one ends
        at the disconnect. On a keyed channel the current values are the response: they
        go into the cache by the interest-response rules, and are returned.
        """
        interest = _interest(channel, keys, regex, durable)
        k = self.ctx.keys(channel)
        if not (yield from run(channel_ops.exists(k))):
            raise ChannelNotFoundError(f"channel {channel!r} does not exist")
        yield from run(ops.join(k, self.id))  # registered before: keeps its queue
        self.record.interests[channel] = interest
        yield from store.save(self.ctx, self.record)
        if self.max_depth is not None:
            yield from run(ops.queue(k, self.id, self._limits(), True, depth=False))
        values, ids = yield from send(channel_ops.last_values(k))
        response = {
            key: value
            for key, value in channel_ops.parse_last(values, ids).items()
            if interest_matches(interest, key)
        }
        self.cache(channel).apply_response(response)
        return {key: data for key, (_, data) in response.items()}

    def add_listener(self, channel: str, listener: Any) -> None:
        """`listener.on_event(event)` (or `listener(event)`, for a function) for each event;
        `after_region_live(channel)` if it has it."""
        added = as_listener(listener)
        with self._listeners_lock:
            self._listeners[channel] = (*self._listeners.get(channel, ()), added)

    def listeners(self, channel: str) -> tuple[Any, ...]:
        """The channel's listeners (called for every event: no copy, no lock)."""
        return self._listeners.get(channel, ())

    def cache(self, channel: str) -> LocalCache:
        """The local cache of a channel; reads work while disconnected."""
        cache = self._caches.get(channel)  # one is made only once (called for live events)
        return cache if cache is not None else self._caches.setdefault(channel, LocalCache(channel))

    def _wired(self, loop: Callable[..., D], interests: dict[str, Interest]) -> D:
        """`loop` (the client's delivery: a thread's or a task's) wired to this session's
        state and sequences, over the interests `marking` placed markers for."""
        delivery = loop(
            self.ctx,
            self.id,
            interests,
            self.markers,
            self.listeners,
            self.cache,
            outage=self.lost_connection,
            away=self.away,
            resume=self.resuming,
            queue_gone=self.queue_gone,
            ended=self.ended,
            batch=self.recovery_buffer,
            auto_ack=self.auto_ack,
            clock_offset_ms=self._clock_offset_ms,
        )
        delivery.replicated = self.replicated
        delivery.touch = ops.touch(self.ctx.namespace, self.id, self.token, self.ctx.lease_ms)
        return delivery

    def marking(self) -> Flow[dict[str, Interest]]:
        """Place the replay markers (on every interested channel); the interests to deliver."""
        for channel in self.record.interests:
            self.markers[channel] = yield from run(
                ops.place_marker(self.ctx.keys(channel), self.id)
            )
        return dict(self.record.interests)

    # -- updates (refused while disconnected) -----------------------------------------

    def putting(self, channel: str, key: str, value: Any) -> Flow[str]:
        """Publish `value` for `key` and put it in the local cache; the event id."""
        names.channel_name(channel)
        limit = self.ctx.settings.max_payload_bytes
        event_id = yield from self._publishing(channel, encode_event(value, key, None, limit))
        self.cache(channel).put(key, encode_data(value), event_id)
        return event_id

    def destroying(self, channel: str, key: str) -> Flow[str]:
        """Publish a tombstone for `key` and mark it destroyed locally."""
        names.channel_name(channel)
        event_id = yield from self._publishing(channel, tombstone(check_key(key)))
        self.cache(channel).destroy(key)
        return event_id

    def _publishing(self, channel: str, encoded: Encoded) -> Flow[str]:
        """Publish at once or not at all: a session refuses updates while disconnected."""
        k = self.ctx.keys(channel)
        try:
            yield from send(channel_ops.ensure(k, {}, int(time.time() * 1000)), retry=False)
            return (yield from publish_encoded(self.ctx, k, Batch.of(encoded), retry=False))[0]
        except ConnectionLostError as exc:
            self.lost_connection()
            raise UnconnectedError(f"session {self.id!r} lost its connection: {exc}") from exc

    # -- closing ------------------------------------------------------------------------

    def closing(self, keepalive: bool) -> Flow[None]:
        """Disconnect (the delivery stopped first). keepalive=True keeps the queue and
        durable interests until the timeout; keepalive=False removes the session at once."""
        was_connected = self.connected
        self._set_state("closed")
        if not was_connected:
            return
        try:
            if keepalive:
                for interest in [i for i in self.record.interests.values() if not i.durable]:
                    yield from store.drop_interest(self.ctx, self.id, interest.channel)
                    del self.record.interests[interest.channel]
                self.record.disconnected_ms = yield from store.server_ms(self.ctx)
                yield from store.save(self.ctx, self.record)
                if self.max_depth is not None:  # away from now on: the larger limit holds
                    yield from send(
                        [
                            ops.queue(self.ctx.keys(c), self.id, "", False, depth=False)
                            for c in self.record.interests
                        ]
                    )
            else:
                yield from store.remove(self.ctx, self.record)
        finally:
            with contextlib.suppress(DurablesError):  # else it lapses by itself
                yield from self._release_live_lease()


def _interest(channel: str, wanted: Any, regex: str | None, durable: bool) -> Interest:
    names.channel_name(channel)
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as exc:
            raise ConfigError(f"invalid key regex {regex!r}: {exc}") from None
        return Interest(channel, None if wanted is ALL_KEYS else (), regex, durable)
    if wanted is ALL_KEYS:
        return Interest(channel, None, None, durable)
    if isinstance(wanted, str) or not all(isinstance(k, str) and k for k in wanted):
        raise ConfigError("keys must be ALL_KEYS or a list of non-empty str")
    return Interest(channel, tuple(wanted), None, durable)


__all__ = ["ALL_KEYS", "Overflow", "SessionCore", "SessionState", "StateListener"]
