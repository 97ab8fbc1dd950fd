"""The reader of a shared or serial durable: many consumers, events dealt by the Lua
dispatcher, each acknowledged on its own. Its state machine is `handout.SharedHandout`,
beside it; this is the loop that sends what the handout asks for, for both clients
(`base.Reader`)."""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ...io.leases import Lease
from ...ops.flows import Flow, run, send
from ..base import C, Reader
from .handout import SharedHandout

if TYPE_CHECKING:
    from ...events import Event
    from ...keys import ChannelKeys
    from ...ops.base import Op
    from ...selector import Selector

log = logging.getLogger(__name__)


class SharedReader(Reader[C]):
    """One consumer attached to a shared or serial durable: events dealt by the Lua
    dispatcher, each acknowledged on its own."""

    def __init__(
        self,
        ctx: C,
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
        self.state: SharedHandout = SharedHandout(
            k, durable, kind, self.id, window=window, lease_ms=ctx.lease_ms, selector=selector
        )
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
            made = partial(self.state.fetch, block)
            ops, replies = yield from self._exchanging(made, self.state.fetch_failed, deadline)
            with self.lock:
                dealt = self.state.on_fetch(replies[: len(ops)])
            if self.replicated:
                dealt = replace(dealt, events=self._waited(replies, dealt.events))
            if dealt.notice is not None:
                self._notice(dealt.notice)
            remaining = deadline - clock()
            if dealt.events or remaining <= 0:
                yield from self._stopping()
                return dealt.events
            if dealt.waited:  # it blocked for new events through a tap already
                continue
            with self.lock:
                wait = self.state.wait(
                    dealt.newest,
                    dealt.rung,
                    min(remaining, self.ctx.settings.block_s),
                    read=not self.replicated,  # (a WAIT must cover what is handed out)
                )
            replies = yield from send(wait, retry=False)
            with self.lock:
                events = self.state.on_wait(replies)
            if events:  # dealt by another's fetch, read behind the wait (keyed)
                yield from self._stopping()
                return events

    def _stopping(self) -> Flow[None]:
        """This consumer stops asking: if it watches for the others, it hands that on."""
        with self.lock:
            leave = self.state.stop_waiting()
        if leave is not None:
            yield from send([leave], retry=False)

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
        yield from self._giving_up(ops)


__all__ = ["SharedReader"]
