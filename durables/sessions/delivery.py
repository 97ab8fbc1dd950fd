"""Delivering a session's events: replay up to the marker, then live (GemFire's durable clients).

One background thread (a task in the asyncio client) reads every interested channel
through the session's consumer group. Events up to a channel's marker were queued while the session
was away: they go to the listeners with `replayed=True` and never touch the
cache. Then each listener's `after_region_live(channel)` is called once, and
later events are applied to the cache and passed on. What to read and what a
reply means is `ops.sessions.SessionCursors`; the round itself (read, deliver, ride out
an outage) is `DeliveryLoop`, a flow both clients drive.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from inspect import isawaitable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ..errors import (
    ConfigError,
    ConnectionLostError,
    DurableNotFoundError,
    DurablesError,
    SlotMovingError,
)
from ..io.context import BaseContext, Context
from ..ops import sessions as ops
from ..ops.channels import wait_replicas
from ..ops.flows import Flow, awaited, recover, run, send
from ..ops.sessions import SessionCursors, interest_matches

if TYPE_CHECKING:
    from ..cache import LocalCache
    from ..events import Event
    from ..ops.base import Op
    from ..ops.sessions import Batch
    from ..records import Interest

log = logging.getLogger(__name__)


class SessionListener(Protocol):
    """What a session calls: every event, and once per channel when it goes live."""

    def on_event(self, event: Event) -> None: ...


@dataclass(frozen=True)
class FunctionListener:
    """A plain function given as a session listener: called for every event."""

    function: Callable[[Event], Any]

    def on_event(self, event: Event) -> Any:
        return self.function(event)


def as_listener(listener: Any) -> Any:
    """A listener object (`on_event`, maybe `after_region_live`) or a function of the event;
    `ConfigError` for anything else, at once rather than at every event."""
    if hasattr(listener, "on_event"):
        return listener
    if callable(listener):
        return FunctionListener(listener)
    raise ConfigError(
        f"a session listener is a function of the event or an object with on_event(event), "
        f"got {type(listener).__name__}"
    )


C = TypeVar("C", bound=BaseContext)


class DeliveryLoop(ABC, Generic[C]):
    """What one live session's delivery does, for both clients: read every interested
    channel, replay then go live, call the listeners, acknowledge, ride out outages. The
    sync `Delivery` drives it on a thread, `durables.aio.session.AsyncDelivery` on a task;
    `C` is the client's context.

    The session's hooks: `outage()` when the connection broke, `away()` while the session
    is not live (the heartbeat found its live lease gone, as after a long pause), the flows
    `resume()` to be live again and `queue_gone()` when a queue vanished (true: the session
    expired, and is away), and `ended(error)` when the delivery stops on an error.
    """

    def __init__(
        self,
        ctx: C,
        session_id: str,
        interests: dict[str, Interest],
        markers: dict[str, str],
        listeners: Callable[[str], Sequence[Any]],
        cache: Callable[[str], LocalCache],
        *,
        outage: Callable[[], None],
        away: Callable[[], bool],
        resume: Callable[[], Flow[None]],
        queue_gone: Callable[[], Flow[bool]],
        ended: Callable[[BaseException], None],
        batch: int | None,
        auto_ack: bool,
        clock_offset_ms: int,
    ) -> None:
        self.ctx = ctx
        self.session_id = session_id
        self.auto_ack = auto_ack
        self.clock_offset_ms = clock_offset_ms
        """The server's clock minus ours: ack timeouts are judged on the server's."""
        self.cursors = SessionCursors(
            ctx.namespace,
            session_id,
            interests,
            markers,
            interest_matches,
            batch=batch or ctx.settings.read_batch,
        )
        self._outage, self._away, self._resume = outage, away, resume
        self._queue_gone = queue_gone
        self._ended = ended
        self.listeners = listeners
        self.cache = cache
        self.live: set[str] = set()
        self.error: BaseException | None = None
        self.stopping = False
        """Set when the session closes: the delivery ends after the round under way."""
        self.reading = False
        """A read is under way (the asyncio delivery may cancel it on close)."""
        self.acks: list[Op[Any]] = []
        """Acknowledgements of delivered batches, sent with the next read (one round trip
        per batch, as a hand-written reader does) or when the delivery stops."""

    @abstractmethod
    def ack_event(self, event: Event) -> Any:
        """An ack-required event acknowledged by the application."""

    replicated = 0
    """Deliver only events that this many replicas hold: the session's heartbeat (`touch`,
    a write later than every event read) and a `WAIT` in each read's round trip; a read the
    replicas did not confirm in time is not delivered, but read again from the pending list
    next round."""
    touch: Op[Any] | None = None
    """The session's heartbeat, sent before each `WAIT` when `replicated`."""

    def running(self) -> Flow[None]:
        try:
            while not self.stopping:
                try:
                    if self._away():  # stopped past its live lease, the server answering
                        yield from self._come_back()
                    yield from self._round()
                except SlotMovingError:  # the server answers: a cluster moving the slot
                    self.cursors.restart()  # read what was in flight again, still connected
                except ConnectionLostError:
                    yield from self._ride_out()
                except DurableNotFoundError:  # a queue is gone: closed by an overflow, or expired
                    if not (yield from self._queue_gone()):
                        raise  # (expired: the session is away, and comes back anew)
            yield from self.flushing_acks()
        except DurablesError as exc:
            self.error = exc
            log.error("session delivery stopped: %s", exc)
            self._ended(exc)
        except Exception as exc:  # a bug: said loudly, not a delivery that just ends
            self.error = exc
            log.exception("session delivery stopped by an unexpected error")
            self._ended(exc)

    def _ride_out(self) -> Flow[None]:
        """Wait for the server (a slice at a time, so a stop stays prompt), let the session
        resume, then read the in-flight events again."""
        self._outage()
        while not self.stopping:
            if (yield from recover(self.ctx.clock() + self.ctx.settings.block_s)):
                try:
                    yield from self._come_back()
                except ConnectionLostError:
                    continue  # gone again
                return

    def _come_back(self) -> Flow[None]:
        """Be the session's live client again (the same session within its keep-alive, else
        a new one with the same interests), then read the in-flight events again."""
        yield from self._resume()
        self.cursors.restart()

    def _round(self) -> Flow[None]:
        block_ms = int(self.ctx.settings.block_s * 1000)
        self.reading = True
        try:
            ops = [*self.acks, self.cursors.read(block_ms)]
            if self.replicated and self.touch is not None:
                # WAIT counts the last write of its own connection, and the read may count
                # as none (a read of the pending list; a blocked read answered by a publish,
                # replicated in the publisher's name): the touch is a write later than it
                timeout = self.ctx.settings.replica_timeout_s
                ops += [self.touch, wait_replicas(self.replicated, timeout)]
            replies = yield from send(ops, retry=False)
        finally:
            self.reading = False
        read = replies[len(self.acks)]
        self.acks.clear()  # sent (after an outage they go with the first read again)
        if self.replicated and not (replies[-2] and replies[-1] >= self.replicated):
            if read:
                self.cursors.restart()  # not confirmed: read again, not delivered
            return
        for batch in self.cursors.on_read(read):
            if batch.live_first:
                yield from self._go_live(batch.channel)
            acked = yield from self._deliver(batch)
            self.cursors.handed(batch)
            ack = self.cursors.ack(batch, acked)
            if ack is not None:
                self.acks.append(ack)

    def flushing_acks(self) -> Flow[None]:
        if self.acks:
            with contextlib.suppress(ConnectionLostError):  # then they come back, discarded
                yield from send(self.acks, retry=False)
            self.acks.clear()

    def _deliver(self, batch: Batch) -> Flow[list[str]]:
        """Hand a batch's events to the listeners of its channel; the ack-required events
        handled, to acknowledge with the batch.

        The listeners are called here, not through a `Call` effect each: a trip through the
        driver per event and listener was most of a session's client time. Only what an
        async listener returns goes to the driver (`awaited`), so the asyncio client still
        finishes each listener before it calls the next."""
        channel = batch.channel
        acked: list[str] = []
        for event in batch.events:
            ack_required = event.ack_timeout_ms is not None
            if ack_required and not event.redelivered and self._too_late(event):
                yield from self._nack(event, "expired_before_sent")
                continue
            if not event.replayed:
                if channel not in self.live:
                    yield from self._go_live(channel)
                self._cache_live(event)
            if ack_required:
                event.owner = self
            handled = True
            for listener in self.listeners(channel):
                try:
                    returned = listener.on_event(event)
                    if returned is not None and isawaitable(returned):
                        yield from awaited(returned)
                except Exception:
                    handled = False
                    log.exception("session listener failed on event %s of %r", event.id, channel)
            if handled and ack_required and self.auto_ack:
                acked.append(event.id)
        return acked

    def _cache_live(self, event: Event) -> None:
        """A live event updates the local cache (a replayed one never does)."""
        if event.key is not None:
            self.cache(event.channel).apply_live(event.key, event.data, event.id, event.destroyed)

    def _too_late(self, event: Event) -> bool:
        sent_ms = int(event.id.partition("-")[0])
        now_ms = time.time() * 1000 + self.clock_offset_ms
        return now_ms > sent_ms + (event.ack_timeout_ms or 0)

    def _nack(self, event: Event, reason: str) -> Flow[None]:
        """Record the nack (unless housekeeping did, before this session read the event)."""
        k = self.ctx.keys(event.channel)
        if (yield from run(ops.nack(k, event.id, self.session_id, reason), retry=False)):
            log.warning(
                "session %r: event %s of %r %s",
                self.session_id,
                event.id,
                event.channel,
                reason.replace("_", " "),
            )

    def ack_op(self, event: Event) -> Op[Any]:
        """The acknowledgement of an ack-required event the application acknowledged."""
        return ops.ack(self.ctx.keys(event.channel), self.session_id, [event.id])

    def rollback_event(self, event: Event, delay_s: float = 0.0) -> None:
        raise ConfigError(
            "a session's events cannot be rolled back; an ack-required event left "
            "unacknowledged is sent again after a reconnect, or nacked at its timeout"
        )

    def _go_live(self, channel: str) -> Flow[None]:
        if channel in self.live:
            return
        self.live.add(channel)
        for listener in self.listeners(channel):
            after = getattr(listener, "after_region_live", None)
            if after is None:
                continue
            try:
                returned = after(channel)
                if returned is not None and isawaitable(returned):
                    yield from awaited(returned)
            except Exception:
                log.exception("after_region_live failed for %r", channel)


class Delivery(DeliveryLoop[Context]):
    """The thread that feeds one live session's listeners and caches (from `start()`)."""

    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self.ctx.executor.drive,
            args=(self.running(),),
            name=f"durables-{self.session_id}",
            daemon=True,
        )
        self.ctx.runtime.own(self)
        self._thread.start()

    def stop(self) -> None:
        self.stopping = True
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._thread.join()
        self.ctx.runtime.disown(self)

    close = stop

    def ack_event(self, event: Event) -> None:
        """An ack-required event acknowledged by the application."""
        self.ctx.executor.run(self.ack_op(event))
