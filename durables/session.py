"""Durable client sessions (GemFire's durable clients).

`client.session(id, timeout=...)` creates or resumes a session. Within its
timeout after a disconnect it resumes with its queue and durable interests;
after it, it starts anew (`resumed is False`) and the expiry is logged and
recorded as an alert. `ready_for_events()` places a replay marker on each
interested channel and starts delivery: replayed events first (never applied
to the cache), then `after_region_live`, then live events.

What a session does is `sessions.core.SessionCore` (shared with the asyncio client);
this class drives it, blocking, and delivers from a thread.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .ops.flows import Flow
from .options import Overflow, SessionOptions
from .records import Interest, SessionInfo
from .sessions.core import ALL_KEYS, SessionCore, SessionState
from .sessions.delivery import Delivery, SessionListener

if TYPE_CHECKING:
    from .events import Event
    from .io.context import Context


RegisteredT = TypeVar("RegisteredT")


class SessionFront(SessionCore, ABC, Generic[RegisteredT]):
    """What both clients' sessions take alike; each drives the flows its own way."""

    def register_interest(
        self,
        channel: str,
        keys: Iterable[str] | Any = ALL_KEYS,
        *,
        regex: str | None = None,
        durable: bool = True,
    ) -> RegisteredT:
        """Queue the channel's events (for `keys`, or keys matching `regex`) for this session.

        A durable interest keeps queuing while the session is away; a non-durable one ends
        at the disconnect. On a keyed channel the current values are the response: they
        go into the cache by the interest-response rules, and are returned.
        """
        return self._registering(self.registering(channel, keys, regex, durable))

    @abstractmethod
    def _registering(self, flow: Flow[dict[str, bytes]]) -> RegisteredT:
        """`flow` driven once the session is connected (`UnconnectedError` otherwise)."""


class Session(SessionFront[dict[str, bytes]]):
    """A durable client: a queue per interested channel that outlives disconnects.

    `state` is "connected", "disconnected" (the connection broke: the client retries on
    its own and the server keeps the queue for `timeout` seconds), "expired" (the
    keep-alive passed while away, so a new session with the same interests was opened)
    or "closed".
    """

    ctx: Context

    def __init__(self, ctx: Context, session_id: str, options: SessionOptions) -> None:
        super().__init__(ctx, session_id, options, lock=threading.Lock(), gate=threading.Event)
        self.executor = ctx.executor
        self.executor.drive(self.opening(options.wait_s))

    def info(self) -> SessionInfo:
        """The session's state and queue: events not yet acknowledged over its channels
        (`depth`), of which sent and not yet acknowledged (`in_flight`), and the queue limit
        in force (`max_depth` while connected; the larger `disconnected_max_depth` while
        away and after, until the queue drained to 80 % of `max_depth`)."""
        return self.executor.drive(self.describing())

    def _connected_for(self, what: str) -> None:
        connected = self.executor.state == "connected"
        self.executor.drive(self._check_connected(what, connected))

    def _registering(self, flow: Flow[dict[str, bytes]]) -> dict[str, bytes]:
        self._connected_for("register interest")
        return self.executor.drive(flow)

    def add_listener(
        self, channel: str, listener: SessionListener | Callable[[Event], object]
    ) -> None:
        """`listener.on_event(event)` (or `listener(event)`, for a function) for each event;
        `after_region_live(channel)` if it has it."""
        super().add_listener(channel, listener)

    def ready_for_events(self) -> None:
        """Place the replay markers and start delivering: replay, after_region_live, live."""
        self._connected_for("get ready for events")
        if self._delivery is not None:
            return
        interests = self.executor.drive(self.marking())
        delivery = self._wired(Delivery, interests)
        self._delivery = delivery
        delivery.start()

    def put(self, channel: str, key: str, value: Any) -> str:
        """Publish `value` for `key` and put it in the local cache; returns the event id."""
        self._connected_for("put")
        return self.executor.drive(self.putting(channel, key, value))

    def destroy(self, channel: str, key: str) -> str:
        """Publish a tombstone for `key` and mark it destroyed locally."""
        self._connected_for("destroy")
        return self.executor.drive(self.destroying(channel, key))

    def close(self, keepalive: bool = True) -> None:
        """Disconnect. keepalive=True keeps the queue and durable interests until the
        timeout; keepalive=False removes the session at once."""
        if isinstance(self._delivery, Delivery):
            self._delivery.stop()
        self._delivery = None
        self.executor.drive(self.closing(keepalive))

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(keepalive=True)


__all__ = [
    "ALL_KEYS",
    "Interest",
    "Overflow",
    "Session",
    "SessionFront",
    "SessionInfo",
    "SessionOptions",
    "SessionState",
]
