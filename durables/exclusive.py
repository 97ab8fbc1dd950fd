"""The synchronous reader of an exclusive durable: one consumer at a time (a lease), in
order, cumulative ack. The state lives in `ops.exclusive.ExclusiveCursor`; this class
sends what it asks for, under the consumer's lock.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import ConnectionLostError, DurableInUseError, LeaseLostError
from .leases import Lease, LeaseHolder
from .ops.exclusive import ExclusiveCursor

if TYPE_CHECKING:
    from .context import Context
    from .events import Event
    from .keys import ChannelKeys
    from .ops.base import Op
    from .selector import Selector


class ExclusiveReader(LeaseHolder):
    """The server side of the one consumer attached to an exclusive durable."""

    stops_on_error = True

    def __init__(
        self, ctx: Context, k: ChannelKeys, durable: str, name: str, selectors: list[Selector]
    ) -> None:
        self.ctx = ctx
        self.k = k
        self.notices: list[str] = []
        self.lock = threading.RLock()
        """Guards the cursor: a listener may ack on another thread while this one reads."""
        self.token = f"{name}@{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.state = ExclusiveCursor(
            k, durable, self.token, lease_ms=ctx.lease_ms, batch=ctx.settings.read_batch,
            selectors=selectors,
        )  # fmt: skip
        self._context = self.state.context
        self._epoch = 0

    @property
    def discarded(self) -> int:
        return self.state.discarded

    def attach(self) -> None:
        self._epoch = self.ctx.executor.epoch
        self.state.on_attach(self.ctx.executor.run(self.state.attach()))
        self.ctx.runtime.heartbeat.add(Lease(self.token, self.state.renew(), self._on_lost))

    def _reattach(self) -> None:
        """After an outage or a lapsed lease: take the lease again if it is still free (or
        still ours), and go on where the server says this consumer stands."""
        epoch = self.ctx.executor.epoch
        try:
            counts = self.ctx.executor.run(self.state.attach(), retry=False)
        except DurableInUseError as exc:
            raise LeaseLostError(f"{self._context}: this consumer lost its lease ({exc})") from exc
        with self.lock:
            self.state.on_reattach(counts)
        self._epoch, self._lost = epoch, False
        self.ctx.runtime.heartbeat.add(Lease(self.token, self.state.renew(), self._on_lost))

    def read(self, timeout: float) -> list[Event]:
        """Events within `timeout`; through an outage it waits and attaches again, and
        returns [] if the server is still away when `timeout` ends."""
        deadline = self.ctx.clock() + timeout
        while True:
            try:
                if self._lost or self._epoch != self.ctx.executor.epoch:
                    self._reattach()  # LeaseLostError if another consumer holds it now
                try:
                    return self._read(deadline)
                except LeaseLostError:
                    self._lost = True  # the lease lapsed: take it again if it is free
            except ConnectionLostError:
                if not self.ctx.executor.recover(until=deadline):
                    return []

    def _read(self, deadline: float) -> list[Event]:
        clock, executor = self.ctx.clock, self.ctx.executor
        while True:
            with self.lock:
                ops = self.state.read()
            try:
                replies = executor.run_all(ops, retry=False)
            except BaseException:
                with self.lock:
                    self.state.read_failed()
                raise
            with self.lock:
                events, again = self.state.on_read(replies)
            self.ctx.touch(self.k.channel)
            if events:
                return events
            if again:
                continue
            if replies[-1]:  # entries came, all skipped by the filter
                return []
            remaining = deadline - clock()
            if remaining <= 0:
                return []
            seconds = min(remaining, self.ctx.settings.block_s)
            entries = executor.run(self.state.wait(seconds), retry=False)
            if entries:
                with self.lock:
                    return self.state.events(entries)

    def commit(self, events: Sequence[Event], *, defer: bool = False, retry: bool = True) -> None:
        with self.lock:
            sent = self._send(self.state.commit(events, defer=defer), retry)
        self._touched(sent)

    def ack(self, event: Event, outstanding: list[Event], *, defer: bool = False) -> list[Event]:
        with self.lock:
            op, left = self.state.ack(event, outstanding, defer=defer)
            sent = self._send(op)
        self._touched(sent)
        return left

    def flush_acks(self) -> None:
        with self.lock:
            sent = self._send(self.state.flush())
        self._touched(sent)

    def _send(self, op: Op[Any] | None, retry: bool = True) -> bool:
        """Send an acknowledgement the cursor asked for (under the lock, so acks go out in
        the order the cursor made them); whether there was one."""
        if op is not None:
            self.ctx.executor.run(op, retry=retry)
        return op is not None

    def _touched(self, sent: bool) -> None:
        if sent:  # acknowledged events may be trimmed now
            self.ctx.touch(self.k.channel)

    def rollback(self, events: Sequence[Event], delay_s: float = 0.0) -> None:
        with self.lock:
            op = self.state.rollback(events)
            if op is not None:
                self.ctx.executor.run(op)

    def release(self, unhanded: Sequence[Event]) -> None:
        """Give up the lease; with the server away, it lapses by itself."""
        self.ctx.runtime.heartbeat.remove(self.token)
        with self.lock, contextlib.suppress(LeaseLostError):  # lost: nothing left to give up
            self.ctx.executor.run_all(self.state.release(unhanded), retry=False)
        self.ctx.touch(self.k.channel)
