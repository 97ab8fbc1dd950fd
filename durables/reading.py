"""The read loops of both clients' readers, written once as flows (`ops.flows`).

A reader attaches (takes a lease, joins a ring), reads through its state machine
(`ops.exclusive.ExclusiveCursor`, `ops.shared.SharedHandout`), waits when nothing came,
attaches again after an outage or a lapsed lease, acknowledges and releases. Those
sequences are the same for the sync and the asyncio client; only the sending differs.
So they live here as generators, and `durables.exclusive`, `durables.shared` and
`durables.aio.readers` drive them with their executor (blocking or awaiting).

`lock` guards the state machine: a `threading.RLock` in the sync client (a listener may
acknowledge on another thread while a read blocks; a read's round trip runs outside it),
a no-op in the asyncio client (one thread).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, suppress
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .errors import ConnectionLostError, DurableInUseError, LeaseLostError
from .io.leases import Lease, LeaseHolder, waiting_out
from .ops.channels import wait_replicas
from .ops.exclusive import ExclusiveCursor
from .ops.flows import Flow, recover, run, send
from .ops.shared import SharedHandout
from .server import processes

if TYPE_CHECKING:
    from .events import Event
    from .io.context import BaseContext
    from .keys import ChannelKeys
    from .ops.base import Op
    from .selector import Selector

log = logging.getLogger(__name__)


class ReaderLoop(LeaseHolder, ABC):
    """What both kinds of reader share: the context, the lease, the outage loop."""

    stops_on_error = False
    state: ExclusiveCursor | SharedHandout
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

    def __init__(self, ctx: BaseContext, k: ChannelKeys, lock: AbstractContextManager[Any]) -> None:
        self.ctx: BaseContext = ctx
        self.k = k
        self.lock = lock
        self.notices: list[str] = []
        """Asynchronous notices from the durable (another consumer's filter took over)."""
        self._epoch = 0

    def reading(self, timeout: float) -> Flow[list[Event]]:
        """Events within `timeout`; through an outage it waits and attaches again, and
        returns [] if the server is still away when `timeout` ends."""
        deadline = self.ctx.clock() + timeout
        while True:
            try:
                if self._lost or self._epoch != self.ctx.executor.epoch:
                    yield from self.reattaching()  # LeaseLostError: another consumer holds it
                try:
                    return (yield from self.read_until(deadline))
                except LeaseLostError:
                    self._lost = True  # the lease lapsed (or reaped while away): join again
            except ConnectionLostError:
                if not (yield from recover(deadline)):
                    return []

    @property
    def discarded(self) -> int:
        """Exact duplicates not handed out again."""
        return self.state.discarded

    @abstractmethod
    def reattaching(self) -> Flow[None]:
        """Attach again after an outage or a lapsed lease."""

    @abstractmethod
    def read_until(self, deadline: float) -> Flow[list[Event]]:
        """Read (and wait, until `deadline`) once attached."""

    def committing(
        self, events: Sequence[Event], *, defer: bool = False, retry: bool = True
    ) -> Flow[None]:
        """Acknowledge `events`; `defer` lets the next read carry it; without `retry` an
        outage raises at once instead of being waited out."""
        yield from self.sending(self.commit_ops(events, defer=defer), retry=retry)

    # What acknowledging, rolling back and flushing change, for both clients: the state
    # changes at once (under the lock); the operations returned go out by `sending`,
    # outside the lock (the sync readers drive it, the asyncio ones await it).

    @abstractmethod
    def commit_ops(self, events: Sequence[Event], *, defer: bool = False) -> list[Op[Any]]:
        """Acknowledge `events` (exclusive: up to the last of them): the operations to send
        (none when `defer`red to the next read)."""

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

    def _touched(self) -> None:
        """Acknowledged events may be trimmed now."""
        self.ctx.touch(self.k.channel)

    def _waiting(self, ops: list[Op[Any]], deadline: float) -> list[Op[Any]]:
        """`ops`, and with `replicated` a `WAIT` for the replicas after them."""
        if not self.replicated:
            return ops
        timeout = min(self.ctx.settings.replica_timeout_s, max(0.001, deadline - self.ctx.clock()))
        return [*ops, wait_replicas(self.replicated, timeout)]

    def _waited(self, replies: list[Any], events: list[Event]) -> list[Event]:
        """The events read, if the replicas confirmed them (`_waiting`); else none now: they
        are confirmed before anything else is read (`_confirming`)."""
        if not self.replicated or not events or replies[-1] >= self.replicated:
            return events
        self._unconfirmed = events
        return []

    def _confirming(self, deadline: float) -> Flow[list[Event]]:
        """Events held back until the replicas confirm them: a renewal of the lease (a
        write, so the `WAIT` after it covers the earlier read too) and a `WAIT`; [] if not
        confirmed yet."""
        while True:
            still, confirmed = yield from send(
                self._waiting([self.state.renew()], deadline), retry=False
            )
            if not still:
                self._withdraw(self._unconfirmed)
                self._unconfirmed = ()
                raise LeaseLostError(f"{self._context}: the lease lapsed before the replicas "
                                     f"confirmed the events read")  # fmt: skip
            if confirmed >= self.replicated:
                events, self._unconfirmed = list(self._unconfirmed), ()
                return events
            if self.ctx.clock() >= deadline:
                return []

    def _withdraw(self, events: Sequence[Event]) -> None:
        """Events read that will not be handed out (another consumer has them now)."""

    def sending(self, ops: Sequence[Op[Any]], *, retry: bool = True) -> Flow[None]:
        """Send acknowledgements or rollbacks the state machine made (outside its lock); a
        refusal for a lapsed lease is counted in `lost_acks` and logged once: the
        application's loop goes on."""
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

    def _acks_refused(self) -> None:
        """What the state machine makes of acknowledgements refused for a lapsed lease."""


def holder_gone(token: str) -> bool:
    """Whether the exclusive holder of `token` (name@host:pid:random:scope) is surely dead:
    its process is gone from this very host, boot and pid namespace (`processes`). Nothing
    it sent can then still reach the server but what was already under way, which a new
    holder's attach fences off as after a lapsed lease. Any doubt (another host, another
    container, an older token): False, and the lease is waited out."""
    left, _, rest = token.rpartition("@")
    host_pid, _, scope = rest.rpartition(":")
    host, _, pid = host_pid.rpartition(":")[0].rpartition(":")
    if not left or not pid.isdigit():
        return False
    return processes.surely_gone(host, int(pid), scope)


class ExclusiveLoop(ReaderLoop):
    """The one consumer attached to an exclusive durable: a lease, in order, cumulative
    acknowledgement."""

    stops_on_error = True

    def __init__(
        self,
        ctx: BaseContext,
        k: ChannelKeys,
        durable: str,
        name: str,
        selectors: list[Selector],
        lock: AbstractContextManager[Any],
    ) -> None:
        super().__init__(ctx, k, lock)
        self.token = (f"{name}@{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
                      f":{processes.pid_scope()}")  # fmt: skip
        """name@host:pid:random:scope, the scope telling whether a pid seen on one host
        means the same process (`processes.pid_scope`; see `holder_gone`)."""
        self.state: ExclusiveCursor = ExclusiveCursor(
            k, durable, self.token, lease_ms=ctx.lease_ms, batch=ctx.settings.read_batch,
            selectors=selectors,
        )  # fmt: skip
        self._context = self.state.context
        self._held_until = 0.0
        """Until when (local monotonic seconds) the lease is surely this consumer's: the
        send time of its last renewal or attach, plus the lease time."""
        self.wait_s = 0.0
        """How long the first attach waits for another holder's lease to lapse (`wait=`)."""

    def _lease(self) -> Lease:
        return Lease(self.token, self.state.renew(), self._on_lost, on_held=self._on_held)

    def _on_held(self, sent: float) -> None:
        self._held_until = max(self._held_until, sent + self.ctx.settings.lease_timeout_s)

    def attaching(self) -> Flow[None]:
        """Take the lease, waiting up to `wait_s` for another holder's to lapse; with a
        wait, a holder whose process is surely gone (`holder_gone`) is replaced at once."""
        ctx = self.ctx
        yield from waiting_out(self._attaching_once, self.wait_s, ctx.clock, ctx.pause)

    def _attaching_once(self) -> Flow[None]:
        self._epoch = self.ctx.executor.epoch
        sent = self.ctx.clock()
        try:
            counts = yield from run(self.state.attach())
        except DurableInUseError as exc:
            if not (self.wait_s and holder_gone(exc.holder)):
                raise
            log.warning("%s: taking over from %s, whose process is gone (its lease had %.1f s "
                        "left)", self._context, exc.holder, exc.lease_left_s or 0.0)  # fmt: skip
            counts = yield from run(self.state.attach(dead=exc.holder))
        with self.lock:
            self.state.on_attach(counts)
        self._on_held(sent)
        self.ctx.runtime.heartbeat.add(self._lease())

    def reattaching(self) -> Flow[None]:
        """After an outage or a lapsed lease: take the lease again if it is still free (or
        still ours), and go on where the server says this consumer stands."""
        epoch = self.ctx.executor.epoch
        sent = self.ctx.clock()
        with self.lock:
            self.state.regate()
        try:
            counts = yield from run(self.state.attach(), retry=False)
        except DurableInUseError as exc:
            raise LeaseLostError(f"{self._context}: this consumer lost its lease ({exc})") from exc
        with self.lock:
            self.state.on_reattach(counts)
        self._on_held(sent)
        self._epoch, self._lost = epoch, False
        self.ctx.runtime.heartbeat.add(self._lease())

    def read_until(self, deadline: float) -> Flow[list[Event]]:
        clock = self.ctx.clock
        while True:
            if self._unconfirmed:
                return (yield from self._fenced((yield from self._confirming(deadline))))
            block = min(deadline - clock(), self.ctx.settings.block_s)
            with self.lock:
                ops = self.state.read(block)
            try:
                replies = yield from send(self._waiting(ops, deadline), retry=False)
            except BaseException:
                with self.lock:
                    self.state.read_failed()
                raise
            with self.lock:
                events, again = self.state.on_read(replies[: len(ops)])
            self._touched()
            if events:
                return (yield from self._fenced(self._waited(replies, events)))
            if again:
                continue
            if replies[-1]:  # entries came, all skipped by the filter
                return []
            if deadline - clock() <= 0:
                return []

    def _fenced(self, events: list[Event]) -> Flow[list[Event]]:
        """`events`, if the lease is surely still this consumer's; else, once the server
        confirms it is. A holder paused past its lease (SIGSTOP, a VM stall) may find a read
        answered before the pause: an heir has those events now, so they are withdrawn
        (read again at the next attach, if it is still free) and `LeaseLostError` raised."""
        clock = self.ctx.clock
        if not events or (clock() < self._held_until and not self._lost):
            return events
        sent = clock()
        if (yield from run(self.state.renew(), retry=False)):
            self._on_held(sent)
            return events
        self._withdraw(events)
        raise LeaseLostError(f"{self._context}: the lease lapsed while this consumer read")

    def _withdraw(self, events: Sequence[Event]) -> None:
        with self.lock:
            self.state.withdraw(events)

    def commit_ops(self, events: Sequence[Event], *, defer: bool = False) -> list[Op[Any]]:
        """Up to the last of `events` (the lock is not held over the round trip: a
        cumulative ack that arrives after a later one acknowledges nothing new)."""
        with self.lock:
            op = self.state.commit(events, defer=defer)
        return [] if op is None else [op]

    def _acks_refused(self) -> None:
        """The refused cumulative ack goes with the first read after attaching again (still
        free, the lease is this consumer's again; else its events are the next holder's)."""
        with self.lock:
            self.state.ack_refused()

    def ack_ops(
        self, event: Event, outstanding: list[Event], *, defer: bool = False
    ) -> tuple[list[Op[Any]], list[Event]]:
        with self.lock:
            op, left = self.state.ack(event, outstanding, defer=defer)
        return ([] if op is None else [op]), left

    def flush_ops(self) -> list[Op[Any]]:
        with self.lock:
            op = self.state.flush()
        return [] if op is None else [op]

    def rollback_ops(self, events: Sequence[Event], delay_s: float = 0.0) -> list[Op[Any]]:
        with self.lock:
            op = self.state.rollback(events)
        return [] if op is None else [op]

    def releasing(self, unhanded: Sequence[Event]) -> Flow[None]:
        """Give up the lease; with the server away, it lapses by itself."""
        self.ctx.runtime.heartbeat.remove(self.token)
        with self.lock:
            ops = self.state.release(unhanded)
        with suppress(LeaseLostError):  # lost: nothing left to give up
            yield from send(ops, retry=False)
        self._touched()


class SharedLoop(ReaderLoop):
    """One consumer attached to a shared or serial durable: events dealt by the Lua
    dispatcher, each acknowledged on its own."""

    def __init__(
        self,
        ctx: BaseContext,
        k: ChannelKeys,
        durable: str,
        kind: str,
        name: str,
        window: int,
        selector: Selector | None,
        on_notice: Callable[[str], object] | None,
        lock: AbstractContextManager[Any],
    ) -> None:
        super().__init__(ctx, k, lock)
        self._on_notice = on_notice
        self.window = window
        self.id = f"{name}#{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.state: SharedHandout = SharedHandout(k, durable, kind, self.id, window=window,
                                   lease_ms=ctx.lease_ms, selector=selector)  # fmt: skip
        self._context = self.state.context

    def attaching(self, *, retry: bool = True) -> Flow[None]:
        """Join (or after an outage or a lapsed lease, join again) with this window."""
        epoch = self.ctx.executor.epoch
        version = yield from run(self.state.attach(), retry=retry)
        with self.lock:
            self.state.on_attach(version)
        self._epoch, self._lost = epoch, False
        self.ctx.runtime.heartbeat.add(Lease(self.id, self.state.renew(), self._on_lost))

    def reattaching(self) -> Flow[None]:
        yield from self.attaching(retry=False)

    def read_until(self, deadline: float) -> Flow[list[Event]]:
        clock = self.ctx.clock
        while True:
            if self._unconfirmed:
                return (yield from self._confirming(deadline))
            block = min(deadline - clock(), self.ctx.settings.block_s)
            with self.lock:
                ops = self.state.fetch(block)
            try:
                replies = yield from send(self._waiting(ops, deadline), retry=False)
            except BaseException:
                with self.lock:
                    self.state.fetch_failed()
                raise
            with self.lock:
                dealt = self.state.on_fetch(replies[: len(ops)])
            if self.replicated:
                dealt = replace(dealt, events=self._waited(replies, dealt.events))
            if dealt.notice is not None:
                self._notice(dealt.notice)
            remaining = deadline - clock()
            if dealt.events or remaining <= 0:
                with self.lock:
                    leave = self.state.stop_waiting()
                if leave is not None:
                    yield from send([leave], retry=False)
                return dealt.events
            if dealt.waited:  # it blocked for new events through a tap already
                continue
            wait = self.state.wait(
                dealt.newest, dealt.rung, min(remaining, self.ctx.settings.block_s)
            )
            yield from run(wait, retry=False)

    def _notice(self, text: str) -> None:
        log.warning("%s: %s", self._context, text)
        self.notices.append(text)
        if self._on_notice is not None:
            self._on_notice(text)

    def commit_ops(self, events: Sequence[Event], *, defer: bool = False) -> list[Op[Any]]:
        if not events:
            return []
        with self.lock:
            self.state.commit(events)
        return [] if defer else self.flush_ops()

    def ack_ops(
        self, event: Event, outstanding: list[Event], *, defer: bool = False
    ) -> tuple[list[Op[Any]], list[Event]]:
        with self.lock:
            self.state.commit([event])
        return ([] if defer else self.flush_ops()), [e for e in outstanding if e is not event]

    def flush_ops(self) -> list[Op[Any]]:
        with self.lock:
            return self.state.flush()

    def rollback_ops(self, events: Sequence[Event], delay_s: float = 0.0) -> list[Op[Any]]:
        with self.lock:
            op = self.state.rollback(events, delay_s)
        return [] if op is None else [op]

    def releasing(self, unhanded: Sequence[Event]) -> Flow[None]:
        """Leave the ring; with the server away, the lease lapses by itself and the
        dispatcher hands this consumer's events to the others."""
        self.ctx.runtime.heartbeat.remove(self.id)
        with self.lock:
            ops = self.state.release(unhanded)
        yield from send(ops, retry=False)
        self._touched()


__all__ = ["ExclusiveLoop", "ReaderLoop", "SharedLoop"]
