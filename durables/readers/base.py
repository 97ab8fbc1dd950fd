"""The reader: one attached consumer's side of the server, the one interface both clients'
consumers use, whatever the durable's kind.

A reader attaches (takes a lease, joins a ring), reads through its kind's state machine,
waits when nothing came, attaches again after an outage or a lapsed lease, acknowledges
and releases. Those sequences are the same for the sync and the asyncio client, so they
are flows (`ops.flows`): `attaching`, `reading`, `sending` and `releasing`, which the sync
consumer drives blocking (`executor.drive(...)`) and the asyncio one awaits (`await
executor.drive(...)`). Acknowledging and rolling back change the state at once, under
`lock`, and return what to send (`commit_ops`, `ack_ops`, `flush_ops`, `rollback_ops`):
the consumer sends it with `sending`, outside the lock, so a listener's acknowledgement
on one thread never holds up a fetch on another (or the heartbeat) for a round trip, nor
for an outage it waits out.

`lock` guards the state machine (and the consumer's outstanding events): a
`threading.RLock` in the sync client, a no-op in the asyncio client (one thread). It is
held only to change state, never over a round trip (`tests/test_layers.py` checks it).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ..errors import ConnectionLostError, DurableNotFoundError, LeaseLostError
from ..io.leases import LeaseHolder
from ..ops.channels import wait_replicas
from ..ops.flows import Flow, recover, run, send

if TYPE_CHECKING:
    from ..events import Event
    from ..io.context import BaseContext
    from ..keys import ChannelKeys
    from ..ops.base import Op

log = logging.getLogger(__name__)

C = TypeVar("C", bound="BaseContext")
"""The client's context: `Context` (sync) or `AsyncContext`; its executor drives the flows."""


class StateMachine(Protocol):
    """What the shared part of a reader asks of its kind's state machine."""

    @property
    def discarded(self) -> int: ...

    def renew(self) -> Op[bool]: ...

    def withdraw(self, events: Sequence[Event]) -> None: ...


class Reader(LeaseHolder, ABC, Generic[C]):
    """One attached consumer of a durable (see the module): the context, the lease, the
    outage loop, and what acknowledging sends. `ExclusiveReader` and `SharedReader` are the
    kinds."""

    closing = False
    """Set as it starts releasing: a fetch under way on another thread (or task) that finds
    the lease lost, or an outage past, attaches no more (`_attaching_again`)."""
    stops_on_error = False
    """A subscription listener's failure ends the subscription (exclusive: nothing past a
    rolled-back event may be acknowledged before a re-subscription)."""
    state: StateMachine
    """The kind's state machine: what to send next and what a reply means."""
    replicated = 0
    """Hand out only events that this many replicas hold (`replicated=N`): a `WAIT` goes in
    the read's round trip, on its connection (the read changed the pending list, so the
    `WAIT` covers every entry it returned), and a failover cannot take back what was
    delivered. Events not confirmed in time are held back and confirmed first next time."""
    _unconfirmed: Sequence[Event] = ()
    lost_acks = 0
    """Acknowledgements and rollbacks the server refused because this consumer's lease had
    lapsed meanwhile (an outage longer than the lease): not the application's error. The
    consumer attaches again at its next read; events it could not acknowledge come again,
    flagged `redelivered`, to whoever holds them next."""

    def __init__(self, ctx: C, k: ChannelKeys, lock: AbstractContextManager[Any]) -> None:
        self.ctx: C = ctx
        self.k = k
        self.lock = lock
        self.notices: list[str] = []
        """Notices the durable sent while attached (another consumer's filter took over)."""
        self._epoch = 0
        self._held_until = 0.0
        """Until when (local monotonic seconds) the lease is surely this consumer's: the
        send time of its last renewal or attach, plus the lease time."""

    @property
    def discarded(self) -> int:
        """Exact duplicates not handed out again."""
        return self.state.discarded

    # -- the flows, driven by the consumer's executor -------------------------------------

    @abstractmethod
    def attaching(self) -> Flow[None]:
        """Attach: from now on this consumer is handed events."""

    def reading(self, timeout: float) -> Flow[list[Event]]:
        """Events within `timeout`; through an outage it waits and attaches again, and
        returns [] if the server is still away when `timeout` ends."""
        deadline = self.ctx.clock() + timeout
        while True:
            if self.closing:
                return []  # closed meanwhile
            try:
                lapsed = self._lost or self._epoch != self.ctx.executor.epoch
                # LeaseLostError: another consumer holds it
                if lapsed and not (yield from self._attaching_again()):
                    return []
                try:
                    return (yield from self.read_until(deadline))
                except LeaseLostError:
                    self._lost = True  # the lease lapsed (or reaped while away): join again
            except ConnectionLostError:
                if not (yield from recover(deadline)):
                    return []

    def sending(self, ops: Sequence[Op[Any]], *, retry: bool = True) -> Flow[None]:
        """Send acknowledgements or rollbacks the state machine made (outside its lock); a
        refusal for a lapsed lease is counted in `lost_acks` and logged once: the
        application's loop goes on. Without `retry` an outage raises at once instead of
        being waited out."""
        if not ops:
            return
        try:
            yield from send(ops, retry=retry)
        except LeaseLostError as exc:
            self._lost = True  # the next read attaches again
            self.lost_acks += 1
            self._acks_refused()
            log.warning("%s: %s; what it held comes again, flagged", self._context, exc)
            return
        self._touched()

    def releasing(self, unhanded: Sequence[Event]) -> Flow[None]:
        """Detach, sending the deferred acknowledgements first; `unhanded` events were read
        but never given to the application. A fetch under way attaches no more."""
        self.closing = True
        yield from self._release(unhanded)

    @abstractmethod
    def _release(self, unhanded: Sequence[Event]) -> Flow[None]:
        """What detaching sends (`releasing`)."""

    def _attaching_again(self) -> Flow[bool]:
        """Attach again (after an outage or a lapsed lease) unless the consumer is being
        closed; one closed while it attached gives that attachment up at once (else a
        closed consumer would hold its lease, or its window's events, for as long as the
        client runs). False if it is closed: nothing is held."""
        if self.closing:
            return False
        yield from self.reattaching()
        if self.closing:
            yield from self._release(())
            return False
        return True

    @abstractmethod
    def reattaching(self) -> Flow[None]:
        """Attach again after an outage or a lapsed lease."""

    @abstractmethod
    def read_until(self, deadline: float) -> Flow[list[Event]]:
        """Read (and wait, until `deadline`) once attached."""

    # -- what acknowledging and rolling back change, at once and under the lock: the
    # -- operations returned go out by `sending`, outside it --------------------------------

    @abstractmethod
    def commit_ops(self, events: Sequence[Event], *, defer: bool = False) -> list[Op[Any]]:
        """Acknowledge `events` (exclusive: up to the last of them, and the events the
        filter skipped): the operations to send, none when `defer`red to the next read."""

    @abstractmethod
    def ack_ops(
        self, event: Event, outstanding: list[Event], *, defer: bool = False
    ) -> tuple[list[Op[Any]], list[Event]]:
        """Acknowledge `event` (exclusive: and all before it): the operations to send (none
        when `defer`red to the next read), and what stays outstanding."""

    @abstractmethod
    def flush_ops(self) -> list[Op[Any]]:
        """The deferred acknowledgements, to send now."""

    @abstractmethod
    def rollback_ops(self, events: Sequence[Event], delay_s: float = 0.0) -> list[Op[Any]]:
        """Hand `events` back (see the kinds for when they come again)."""

    # -- what both kinds' loops share -----------------------------------------------------

    def _exchanging(
        self, made: Callable[[], list[Op[Any]]], failed: Callable[[], None], deadline: float
    ) -> Flow[tuple[list[Op[Any]], list[Any]]]:
        """One read's round trip: the operations the state machine `made` under the lock,
        sent outside it (with `_waiting`'s `WAIT`), and the state machine told when they
        `failed` to go (or their replies were lost). The operations and the replies."""
        with self.lock:
            ops = made()
        try:
            replies = yield from send(self._waiting(ops, deadline), retry=False)
        except BaseException:
            with self.lock:
                failed()
            raise
        return ops, replies

    def _giving_up(self, ops: Sequence[Op[Any]]) -> Flow[None]:
        """Send what gives up the lease, once: a lease already lost leaves nothing to give
        up, and with the server away (or the slot moving past the retries) closing does not
        fail: the lease lapses by itself and the events held come again, flagged. A durable
        deleted meanwhile (or its channel) has nothing left to give back to."""
        try:
            yield from send(ops, retry=False)
        except (LeaseLostError, DurableNotFoundError):
            pass
        except ConnectionLostError as exc:
            log.warning("closing: %s; the lease was not given up, it lapses by itself", exc)
        self._touched()

    def _touched(self) -> None:
        """Acknowledged events may be trimmed now."""
        self.ctx.touch(self.k.channel)

    def _waiting(self, ops: list[Op[Any]], deadline: float) -> list[Op[Any]]:
        """`ops`, and with `replicated` a renewal of the lease and a `WAIT` for the replicas
        after them. `WAIT` waits for the last write made on its own connection, and the
        read may count as none: a read of the pending list writes nothing, and a blocked
        read answered by a publish is replicated in the publisher's name. The renewal is a
        write of this connection later than every event read."""
        if not self.replicated:
            return ops
        timeout = min(self.ctx.settings.replica_timeout_s, max(0.001, deadline - self.ctx.clock()))
        return [*ops, self.state.renew(), wait_replicas(self.replicated, timeout)]

    def _waited(self, replies: list[Any], events: list[Event]) -> list[Event]:
        """The events read, if the replicas confirmed them (`_waiting`: the renewal wrote,
        and the `WAIT` counted enough replicas); else none now: they are confirmed before
        anything else is read (`_confirming`)."""
        if not self.replicated or not events or (replies[-2] and replies[-1] >= self.replicated):
            return events
        self._unconfirmed = events
        return []

    def _confirming(self, deadline: float) -> Flow[list[Event]]:
        """Events held back until the replicas confirm them: a renewal of the lease (a
        write, so the `WAIT` after it covers the earlier read too) and a `WAIT`; [] if not
        confirmed yet."""
        while True:
            still, confirmed = yield from send(self._waiting([], deadline), retry=False)
            if not still:
                self._withdraw(self._unconfirmed)
                self._unconfirmed = ()
                raise LeaseLostError(
                    f"{self._context}: the lease lapsed before the replicas "
                    f"confirmed the events read"
                )
            if confirmed >= self.replicated:
                events, self._unconfirmed = list(self._unconfirmed), ()
                return events
            if self.ctx.clock() >= deadline:
                return []

    def _on_held(self, sent: float) -> None:
        """A renewal or an attach sent at `sent` (local monotonic seconds) found the lease
        this consumer's."""
        self._held_until = max(self._held_until, sent + self.ctx.settings.lease_timeout_s)

    def _fenced(self, events: list[Event]) -> Flow[list[Event]]:
        """`events`, if the lease is surely still this consumer's; else, once the server
        confirms it is. A holder paused past its lease (SIGSTOP, a VM stall) may find a read
        answered before the pause: an heir has those events now, so they are withdrawn
        (read again at the next attach, if it is still free) and `LeaseLostError` raised."""
        clock = self.ctx.clock
        if not events or (clock() < self._held_until and not self._lost):
            return events
        sent = clock()
        try:
            still = yield from run(self.state.renew(), retry=False)
        except BaseException:
            # not handed out (an outage, say): the attach after it reads them again, so
            # the state must not count them as held by the application
            self._withdraw(events)
            raise
        if still:
            self._on_held(sent)
            return events
        self._withdraw(events)
        raise LeaseLostError(f"{self._context}: the lease lapsed while this consumer read")

    def _withdraw(self, events: Sequence[Event]) -> None:
        """Events read that will not be handed out (another consumer has them now)."""
        with self.lock:
            self.state.withdraw(events)

    def _acks_refused(self) -> None:
        """What the state machine makes of acknowledgements refused for a lapsed lease."""


__all__ = ["C", "Reader", "StateMachine"]
