"""Durable client sessions (GemFire's durable clients, seed 000).

`client.session(id, timeout=...)` creates or resumes a session. Within its
timeout after a disconnect it resumes with its queue and durable interests;
after it, it starts anew (`resumed is False`) and the expiry is logged and
recorded as an alert. `ready_for_events()` places a replay marker on each
interested channel and starts delivery: replayed events first (never applied
to the cache), then `after_region_live`, then live events.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from . import names
from . import session_store as store
from .cache import LocalCache
from .channel import get_channel
from .errors import (
    ConfigError,
    ConnectionLostError,
    DurablesError,
    SessionInUseError,
    UnconnectedError,
)
from .events import check_key, encode_data, encode_event, tombstone
from .leases import Lease
from .ops import channels as channel_ops
from .ops import sessions as ops
from .publishing import publish_encoded
from .records import Interest, SessionInfo, SessionRecord
from .session_delivery import Delivery, SessionListener, as_listener, interest_matches

if TYPE_CHECKING:
    from .context import Context
    from .events import Event

log = logging.getLogger(__name__)


class _AllKeys:
    """Interest in every key of a channel."""

    def __repr__(self) -> str:
        return "ALL_KEYS"


ALL_KEYS: Any = _AllKeys()


SessionState = Literal["connected", "disconnected", "expired", "closed"]
Overflow = Literal["close", "drop_oldest"]
StateListener = Callable[[str, str], object]


class Session:
    """A durable client: a queue per interested channel that outlives disconnects.

    `state` is "connected", "disconnected" (the connection broke: the client retries on
    its own and the server keeps the queue for `timeout` seconds), "expired" (the
    keep-alive passed while away, so a new session with the same interests was opened)
    or "closed".
    """

    def __init__(
        self,
        ctx: Context,
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
        self._timeout_ms = int(timeout * 1000)
        self._clock_offset_ms = 0
        self._caches: dict[str, LocalCache] = {}
        self._listeners: dict[str, list[SessionListener]] = {}
        self._state_listeners: list[StateListener] = []
        self._delivery: Delivery | None = None
        self._state: SessionState = "disconnected"
        self._lock = threading.RLock()
        self.markers: dict[str, str] = {}
        self._take_live_lease()
        try:
            self.resumed, self.record = self._open(self._timeout_ms)
        except BaseException:
            self._release_live_lease()
            raise
        self._state = "connected"
        self._keep_alive()
        if self.record.interests:
            self._queues(self._limits())

    def __repr__(self) -> str:
        return f"Session({self.id!r}, resumed={self.resumed}, state={self._state!r})"

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
        log.log(logging.WARNING if new in ("disconnected", "expired") else logging.INFO,
                "session %r: %s -> %s", self.id, old, new)  # fmt: skip
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

    def info(self) -> SessionInfo:
        """The session's state and queue: events not yet acknowledged over its channels
        (`depth`), of which sent and not yet acknowledged (`in_flight`), and the queue limit
        in force (`max_depth` while connected; the larger `disconnected_max_depth` while
        away and after, until the queue drained to 80 % of `max_depth`)."""
        depth = in_flight = 0
        limits: list[int] = []
        for queue in self._queues():
            depth, in_flight = depth + max(0, queue.depth), in_flight + queue.in_flight
            if queue.limit:
                limits.append(queue.limit)
        limit = max(limits) if limits else self.max_depth
        return SessionInfo(self.id, self._state, depth, limit, self._timeout_ms / 1000,
                           in_flight)  # fmt: skip

    def _limits(self) -> str:
        """The queue limits as `session_queue.lua` stores them, or '-' for none."""
        return ops.queue_limits(self.max_depth, self.disconnected_max_depth, self.overflow,
                                self.ctx.lease_ms)  # fmt: skip

    def _queues(self, limits: str = "") -> list[ops.Queue]:
        """Each interested channel's queue (setting `limits` when given), reporting what an
        overflow did: drops are logged and alerted; a closed queue closes the session."""
        live = None if self._state == "disconnected" else True
        channels = list(self.record.interests)
        found = self.ctx.executor.run_all(
            [ops.queue(self.ctx.keys(c), self.id, limits, live) for c in channels]
        )
        for channel, queue in zip(channels, found, strict=True):
            dropped, closed = ops.overflow_notes(self.id, channel, queue)
            if dropped:
                self._alert(dropped)
            if closed:
                self._overflowed(closed)
        return list(found)

    def _alert(self, message: str) -> None:
        log.warning(message)
        store.alert(self.ctx, message, store.server_ms(self.ctx), session=self.id)

    def _overflowed(self, message: str) -> None:
        """An overflow with overflow='close': the session is closed, its queues discarded."""
        self._alert(message)
        with contextlib.suppress(DurablesError):
            store.remove(self.ctx, self.record)
        self._set_state("closed")

    def _check_overflow(self) -> None:
        """The delivery found a queue gone: find out whether an overflow closed it."""
        self._queues()

    # -- being the one live client of the session ------------------------------------

    def _take_live_lease(self) -> None:
        op = ops.take_live(self.ctx.namespace, self.id, self.token, self.ctx.lease_ms)
        if not self.ctx.executor.run(op, retry=False):
            raise SessionInUseError(
                f"session {self.id!r} is live in another client; close it there first, or wait "
                f"{self.ctx.settings.lease_timeout_s:g} s if that client died"
            )

    def _keep_alive(self) -> None:
        renew = ops.touch(self.ctx.namespace, self.id, self.token, self.ctx.lease_ms)
        self.ctx.runtime.heartbeat.add(Lease(self.token, renew, self._on_lost))

    def _on_lost(self) -> None:
        """The heartbeat found the live lease gone (this client was away past it)."""
        self._lost_connection()

    def _lost_connection(self) -> None:
        if self._state in ("connected", "expired"):
            self._set_state("disconnected")

    def _release_live_lease(self) -> None:
        self.ctx.runtime.heartbeat.remove(self.token)
        self.ctx.executor.run(ops.release_live(self.ctx.namespace, self.id, self.token),
                              retry=False)  # fmt: skip

    def _open(self, timeout_ms: int) -> tuple[bool, SessionRecord]:
        ctx = self.ctx
        now = store.server_ms(ctx)
        self._clock_offset_ms = now - int(time.time() * 1000)
        plan = ops.opening(self.id, store.load(ctx, self.id), now, timeout_ms)
        if plan.expired is not None:
            store.expire(ctx, plan.expired, now)
        for channel in plan.dropped:
            store.drop_interest(ctx, self.id, channel)
        store.save(ctx, plan.record)
        return plan.resumed, plan.record

    def _resume(self) -> None:
        """The server answers again: be the live client again, and go on with the same
        session if its keep-alive has not passed, else with a new one with the same
        interests (seed 002: "a normal new connection ... with the same topic set")."""
        with self._lock:
            if self._state not in ("disconnected",):
                return
            self._take_live_lease()
            interests = dict(self.record.interests)
            resumed, self.record = self._open(self._timeout_ms)
            if not resumed:
                for channel, interest in ops.carried_over(interests, self.record).items():
                    self.ctx.executor.run(ops.join(self.ctx.keys(channel), self.id))
                    self.record.interests[channel] = interest
                store.save(self.ctx, self.record)
            self.resumed = resumed
            self._keep_alive()
        self._set_state("connected" if resumed else "expired")
        self._queues(self._limits())

    def _check_connected(self, what: str) -> None:
        if self._state == "disconnected" and self.ctx.executor.state == "connected":
            with contextlib.suppress(DurablesError):  # back without a delivery thread
                self._resume()
        if not self.connected:
            raise UnconnectedError(
                f"cannot {what} while session {self.id!r} is {self._state}; "
                f"the local cache still serves reads"
            )

    # -- interests, listeners, cache --------------------------------------------------

    @property
    def interests(self) -> dict[str, Interest]:
        return dict(self.record.interests)

    def register_interest(
        self,
        channel: str,
        keys: Iterable[str] | Any = ALL_KEYS,
        *,
        regex: str | None = None,
        durable: bool = True,
    ) -> dict[str, bytes]:
        """Queue the channel's events (for `keys`, or keys matching `regex`) for this session.

        A durable interest keeps queuing while the session is away; a non-durable one ends
        at the disconnect. On a keyed channel the current values are the response: they
        go into the cache by the interest-response rules, and are returned.
        """
        self._check_connected("register interest")
        interest = _interest(channel, keys, regex, durable)
        ch = get_channel(self.ctx, channel)
        self.ctx.executor.run(ops.join(ch.keys, self.id))  # registered before: keeps its queue
        self.record.interests[channel] = interest
        store.save(self.ctx, self.record)
        if self.max_depth is not None:
            self.ctx.executor.run(ops.queue(ch.keys, self.id, self._limits(), True))
        response = {
            key: value for key, value in ch.last_values().items() if interest_matches(interest, key)
        }
        self.cache(channel).apply_response(response)
        return {key: data for key, (_, data) in response.items()}

    def add_listener(
        self, channel: str, listener: SessionListener | Callable[[Event], object]
    ) -> None:
        """`listener.on_event(event)` (or `listener(event)`, for a function) for each event;
        `after_region_live(channel)` if it has it."""
        self._listeners.setdefault(channel, []).append(as_listener(listener))

    def cache(self, channel: str) -> LocalCache:
        """The local cache of a channel; reads work while disconnected."""
        return self._caches.setdefault(channel, LocalCache(channel))

    def ready_for_events(self) -> None:
        """Place the replay markers and start delivering: replay, after_region_live, live."""
        self._check_connected("get ready for events")
        if self._delivery is not None:
            return
        interests = self.record.interests
        for channel in interests:
            self.markers[channel] = self.ctx.executor.run(
                ops.place_marker(self.ctx.keys(channel), self.id)
            )
        self._delivery = Delivery(
            self.ctx, self.id, dict(interests), self.markers,
            lambda c: list(self._listeners.get(c, ())), self.cache,
            outage=self._lost_connection, resume=self._resume, batch=self.recovery_buffer,
            queue_gone=self._check_overflow,
            auto_ack=self.auto_ack, clock_offset_ms=self._clock_offset_ms,
        )  # fmt: skip

    # -- updates (refused while disconnected) -----------------------------------------

    def put(self, channel: str, key: str, value: Any) -> str:
        """Publish `value` for `key` and put it in the local cache; returns the event id."""
        self._check_connected("put")
        names.channel_name(channel)
        limit = self.ctx.settings.max_payload_bytes
        event_id = self._publishing(channel, encode_event(value, key, None, limit))
        self.cache(channel).put(key, encode_data(value), event_id)
        return event_id

    def destroy(self, channel: str, key: str) -> str:
        """Publish a tombstone for `key` and mark it destroyed locally."""
        self._check_connected("destroy")
        names.channel_name(channel)
        event_id = self._publishing(channel, tombstone(check_key(key)))
        self.cache(channel).destroy(key)
        return event_id

    def _publishing(self, channel: str, parts: Sequence[bytes]) -> str:
        """Publish at once or not at all: a session refuses updates while disconnected."""
        ctx, k = self.ctx, self.ctx.keys(channel)
        try:
            ctx.executor.run_all(channel_ops.ensure(k, {}, int(time.time() * 1000)), retry=False)
            return publish_encoded(ctx, k, 1, parts, retry=False)[0]
        except ConnectionLostError as exc:
            self._lost_connection()
            raise UnconnectedError(f"session {self.id!r} lost its connection: {exc}") from exc

    # -- closing ------------------------------------------------------------------------

    def close(self, keepalive: bool = True) -> None:
        """Disconnect. keepalive=True keeps the queue and durable interests until the
        timeout; keepalive=False removes the session at once."""
        if self._delivery is not None:
            self._delivery.stop()
            self._delivery = None
        was_connected = self.connected
        self._set_state("closed")
        if not was_connected:
            return
        try:
            if keepalive:
                for interest in [i for i in self.record.interests.values() if not i.durable]:
                    store.drop_interest(self.ctx, self.id, interest.channel)
                    del self.record.interests[interest.channel]
                self.record.disconnected_ms = store.server_ms(self.ctx)
                store.save(self.ctx, self.record)
            else:
                store.remove(self.ctx, self.record)
        finally:
            with contextlib.suppress(DurablesError):  # else it lapses by itself
                self._release_live_lease()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(keepalive=True)


def check_options(
    session_id: str,
    timeout: object,
    max_depth: int | None,
    disconnected_max_depth: int | None,
    overflow: str,
    recovery_buffer: int | None,
) -> None:
    """`ConfigError` (or `InvalidNameError`) for options a session cannot take."""
    names.session_id(session_id)
    if not isinstance(timeout, int | float) or timeout <= 0:
        raise ConfigError(f"session timeout must be a positive number of seconds: {timeout!r}")
    for label, value in (("max_depth", max_depth), ("recovery_buffer", recovery_buffer),
                         ("disconnected_max_depth", disconnected_max_depth)):  # fmt: skip
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < 1):  # fmt: skip
            raise ConfigError(f"{label} must be a positive int, got {value!r}")
    if overflow not in ("close", "drop_oldest"):
        raise ConfigError(f"overflow must be 'close' or 'drop_oldest', got {overflow!r}")


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


__all__ = ["ALL_KEYS", "Overflow", "Session", "SessionInfo", "SessionState"]
