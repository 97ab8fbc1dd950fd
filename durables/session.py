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
import re
import secrets
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from . import names
from . import session_store as store
from .cache import LocalCache
from .channel import get_channel, open_channel
from .errors import (
    ConfigError,
    ConnectionLostError,
    DurablesError,
    SessionInUseError,
    UnconnectedError,
)
from .events import encode_data
from .leases import Lease
from .ops import sessions as ops
from .records import Interest, SessionRecord
from .session_delivery import Delivery, SessionListener, interest_matches

if TYPE_CHECKING:
    from .context import Context


class _AllKeys:
    """Interest in every key of a channel."""

    def __repr__(self) -> str:
        return "ALL_KEYS"


ALL_KEYS: Any = _AllKeys()


class Session:
    """A durable client: a queue per interested channel that outlives disconnects."""

    def __init__(self, ctx: Context, session_id: str, timeout: float) -> None:
        names.session_id(session_id)
        if not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(f"session timeout must be a positive number of seconds: {timeout!r}")
        self.ctx = ctx
        self.id = session_id
        self.token = secrets.token_hex(8)
        self._caches: dict[str, LocalCache] = {}
        self._listeners: dict[str, list[SessionListener]] = {}
        self._delivery: Delivery | None = None
        self._connected = False
        self.markers: dict[str, str] = {}
        self._take_live_lease()
        try:
            self.resumed, self.record = self._open(int(timeout * 1000))
        except BaseException:
            self._release_live_lease()
            raise
        self._connected = True
        renew = ops.touch(ctx.namespace, session_id, self.token, ctx.lease_ms)
        ctx.runtime.heartbeat.add(Lease(self.token, renew, self._on_lost))

    def __repr__(self) -> str:
        return f"Session({self.id!r}, resumed={self.resumed}, connected={self.connected})"

    # -- being the one live client of the session ------------------------------------

    def _take_live_lease(self) -> None:
        op = ops.take_live(self.ctx.namespace, self.id, self.token, self.ctx.lease_ms)
        if not self.ctx.executor.run(op):
            raise SessionInUseError(
                f"session {self.id!r} is live in another client; close it there first, or wait "
                f"{self.ctx.settings.lease_timeout_s:g} s if that client died"
            )

    def _on_lost(self) -> None:
        self._connected = False

    def _release_live_lease(self) -> None:
        self.ctx.runtime.heartbeat.remove(self.token)
        self.ctx.executor.run(ops.release_live(self.ctx.namespace, self.id, self.token))

    def _open(self, timeout_ms: int) -> tuple[bool, SessionRecord]:
        ctx = self.ctx
        now = store.server_ms(ctx)
        record = store.load(ctx, self.id)
        resumed = record is not None and not record.expired(now)
        if record is not None and not resumed:
            store.expire(ctx, record, now)
        if record is None or not resumed:
            record = SessionRecord(self.id, timeout_ms, now, now)
        else:
            for interest in [i for i in record.interests.values() if not i.durable]:
                store.drop_interest(ctx, self.id, interest.channel)
                del record.interests[interest.channel]
        record.timeout_ms, record.last_seen_ms, record.disconnected_ms = timeout_ms, now, 0
        store.save(ctx, record)
        return resumed, record

    @property
    def connected(self) -> bool:
        """True while this client is the session's live client and the server answers."""
        return self._connected

    def _check_connected(self, what: str) -> None:
        if not self._connected:
            raise UnconnectedError(
                f"cannot {what} while session {self.id!r} is disconnected; "
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
        response = {
            key: value for key, value in ch.last_values().items() if interest_matches(interest, key)
        }
        self.cache(channel).apply_response(response)
        return {key: data for key, (_, data) in response.items()}

    def add_listener(self, channel: str, listener: SessionListener) -> None:
        """`listener.on_event(event)` for each event; `after_region_live(channel)` if it has it."""
        self._listeners.setdefault(channel, []).append(listener)

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
        )  # fmt: skip

    # -- updates (refused while disconnected) -----------------------------------------

    def put(self, channel: str, key: str, value: Any) -> str:
        """Publish `value` for `key` and put it in the local cache; returns the event id."""
        self._check_connected("put")
        event_id = self._publishing(lambda: open_channel(self.ctx, channel).publish(value, key=key))
        self.cache(channel).put(key, encode_data(value), event_id)
        return event_id

    def destroy(self, channel: str, key: str) -> str:
        """Publish a tombstone for `key` and mark it destroyed locally."""
        self._check_connected("destroy")
        event_id = self._publishing(lambda: open_channel(self.ctx, channel).remove_key(key))
        self.cache(channel).destroy(key)
        return event_id

    def _publishing(self, publish: Any) -> str:
        try:
            return str(publish())
        except ConnectionLostError as exc:
            self._connected = False
            raise UnconnectedError(f"session {self.id!r} lost its connection: {exc}") from exc

    # -- closing ------------------------------------------------------------------------

    def close(self, keepalive: bool = True) -> None:
        """Disconnect. keepalive=True keeps the queue and durable interests until the
        timeout; keepalive=False removes the session at once."""
        if self._delivery is not None:
            self._delivery.stop()
            self._delivery = None
        was_connected, self._connected = self._connected, False
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


__all__ = ["ALL_KEYS", "Session"]
