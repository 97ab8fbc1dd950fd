"""The synchronous reader of a shared or serial durable: many consumers, events dealt by a
Lua dispatcher. The state lives in `ops.shared.SharedHandout`; this class sends what it
asks for, under the consumer's lock.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .errors import ConnectionLostError, LeaseLostError
from .leases import Lease, LeaseHolder
from .ops.shared import SharedHandout

if TYPE_CHECKING:
    from .context import Context
    from .events import Event
    from .keys import ChannelKeys
    from .selector import Selector

log = logging.getLogger(__name__)


class SharedReader(LeaseHolder):
    """The server side of one consumer attached to a shared or serial durable."""

    stops_on_error = False

    def __init__(
        self,
        ctx: Context,
        k: ChannelKeys,
        durable: str,
        kind: str,
        name: str,
        window: int,
        selector: Selector | None = None,
        on_notice: Callable[[str], object] | None = None,
    ) -> None:
        self.ctx = ctx
        self.k = k
        self.notices: list[str] = []
        """Asynchronous notices from the durable (seed 004: another consumer's filter took over)."""
        self._on_notice = on_notice
        self.window = window
        self.lock = threading.RLock()
        self.id = f"{name}#{secrets.token_hex(4)}"
        self.state = SharedHandout(k, durable, kind, self.id, window=window,
                                   lease_ms=ctx.lease_ms, selector=selector)  # fmt: skip
        self._context = self.state.context
        self._epoch = 0

    @property
    def discarded(self) -> int:
        return self.state.discarded

    def attach(self, *, retry: bool = True) -> None:
        """Join (or after an outage or a lapsed lease, join again) with this window."""
        epoch = self.ctx.executor.epoch
        version = self.ctx.executor.run(self.state.attach(), retry=retry)
        with self.lock:
            self.state.on_attach(version)
        self._epoch, self._lost = epoch, False
        self.ctx.runtime.heartbeat.add(Lease(self.id, self.state.renew(), self._on_lost))

    def read(self, timeout: float) -> list[Event]:
        """Events within `timeout`; through an outage it waits and attaches again, and
        returns [] if the server is still away when `timeout` ends."""
        deadline = self.ctx.clock() + timeout
        while True:
            try:
                if self._lost or self._epoch != self.ctx.executor.epoch:
                    self.attach(retry=False)
                try:
                    return self._read(deadline)
                except LeaseLostError:
                    self._lost = True  # reaped while away: join again
            except ConnectionLostError:
                if not self.ctx.executor.recover(until=deadline):
                    return []

    def _read(self, deadline: float) -> list[Event]:
        clock, executor = self.ctx.clock, self.ctx.executor
        while True:
            block = min(deadline - clock(), self.ctx.settings.block_s)
            with self.lock:
                ops = self.state.fetch(block)
            try:
                replies = executor.run_all(ops, retry=False)
            except BaseException:
                with self.lock:
                    self.state.fetch_failed()
                raise
            with self.lock:
                dealt = self.state.on_fetch(replies)
            if dealt.notice is not None:
                self._notice(dealt.notice)
            remaining = deadline - clock()
            if dealt.events or remaining <= 0:
                return dealt.events
            if dealt.waited:  # it blocked for new events through a tap already
                continue
            wait = self.state.wait(
                dealt.newest, dealt.rung, min(remaining, self.ctx.settings.block_s)
            )
            executor.run(wait, retry=False)

    def _notice(self, text: str) -> None:
        log.warning("%s: %s", self._context, text)
        self.notices.append(text)
        if self._on_notice is not None:
            self._on_notice(text)

    def commit(self, events: Sequence[Event], *, defer: bool = False, retry: bool = True) -> None:
        if not events:
            return
        with self.lock:
            self.state.commit(events)
        if not defer:
            self._flush(retry)

    def _flush(self, retry: bool = True) -> None:
        with self.lock:
            ops = self.state.flush()
        if ops:
            self.ctx.executor.run_all(ops, retry=retry)
            self.ctx.touch(self.k.channel)

    def ack(self, event: Event, outstanding: list[Event], *, defer: bool = False) -> list[Event]:
        self.commit([event], defer=defer)
        return [e for e in outstanding if e is not event]

    def flush_acks(self) -> None:
        self._flush()

    def rollback(self, events: Sequence[Event], delay_s: float = 0.0) -> None:
        with self.lock:
            op = self.state.rollback(events, delay_s)
        if op is not None:
            self.ctx.executor.run(op)

    def release(self, unhanded: Sequence[Event]) -> None:
        """Leave the ring; with the server away, the lease lapses by itself and the
        dispatcher hands this consumer's events to the others."""
        self.ctx.runtime.heartbeat.remove(self.id)
        with self.lock:
            ops = self.state.release(unhanded)
        self.ctx.executor.run_all(ops, retry=False)
        self.ctx.touch(self.k.channel)
