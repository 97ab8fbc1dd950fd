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
from contextlib import AbstractContextManager, suppress
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ...errors import DurablesError
from ...io.leases import Lease
from ...ops.flows import Flow, Posted, collect, post, run, send
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
        self._ahead: Posted | None = None
        """A serial holder's read ahead, sent and not yet collected (`_posting`)."""

    def attaching(self, *, retry: bool = True) -> Flow[None]:
        """Join (or after an outage or a lapsed lease, join again) with this window."""
        epoch = self.ctx.executor.epoch
        sent = self.ctx.clock()
        version = yield from run(self.state.attach(), retry=retry)
        with self.lock:
            self.state.on_attach(version)
            if self.replicated:  # each read waits for the replicas: none goes ahead
                self.state.reads_ahead = False
        self._on_held(sent)
        self._epoch, self._lost = epoch, False
        lease = Lease(self.id, self.state.renew(), self._on_lost, on_held=self._on_held)
        self.ctx.runtime.heartbeat.add(lease)

    def reattaching(self) -> Flow[None]:
        yield from self.attaching(retry=False)

    def read_until(self, deadline: float) -> Flow[list[Event]]:
        clock = self.ctx.clock
        while True:
            if self._unconfirmed:
                return (yield from self._confirming(deadline))
            if self._ahead is not None:
                events = yield from self._collecting()  # (it sent the next read ahead)
                if events:
                    return events
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
                return (yield from self._handing(dealt.events))
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
                return (yield from self._handing(events))

    def _handing(self, events: list[Event]) -> Flow[list[Event]]:
        """`events` to hand out, once this consumer stops asking (`_stopping`) and, with
        some, its read ahead went out (`_posting`)."""
        yield from self._stopping()
        if events:
            yield from self._posting()
        return events

    def _posting(self, coming: int = 0) -> Flow[None]:
        """A serial holder's next read goes out now, before the application handles the
        events this one brought (`SharedHandout.ahead`; `coming` of them are not handed
        out yet): the server reads while the client works, and the next fetch collects it."""
        if self.replicated:
            return  # each read waits for the replicas before its events are handed out
        with self.lock:
            ops = self.state.ahead(coming)
        if ops:
            self._ahead = yield from post(ops)

    def _collecting(self) -> Flow[list[Event]]:
        """The events of the read ahead, fenced: they may have waited in the socket through
        a pause or an outage longer than the lease (`_fenced`). The next read ahead goes
        out before they are built, so the server reads while the client builds them."""
        with self.lock:
            posted, self._ahead = self._ahead, None
        if posted is None:
            return []
        entries = yield from self._settling(posted)
        if not entries:
            return []
        yield from self._posting(len(entries))
        with self.lock:
            events = self.state.hand_out(entries)
        return (yield from self._fenced(events))

    def _dropping_ahead(self) -> Flow[None]:
        """Closing: the read ahead's reply read, its events left pending (the release sends
        them back uncounted, never handed out), its acknowledgements kept if not made."""
        with self.lock:
            posted, self._ahead = self._ahead, None
            if posted is None:
                return
            self.state.drop_ahead()
        with suppress(DurablesError):  # closing does not fail for an outage
            yield from self._settling(posted)

    def _settling(self, posted: Posted) -> Flow[list[Any]]:
        """The entries of a read ahead's reply (`SharedHandout.took_ahead`); if the reply is
        lost, the acknowledgements it carried go with the next fetch, and the error is
        raised."""
        try:
            replies = yield from collect(posted)
        except BaseException:
            with self.lock:
                self.state.fetch_failed()
            raise
        with self.lock:
            return self.state.took_ahead(replies)

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

    def _release(self, unhanded: Sequence[Event]) -> Flow[None]:
        """Leave the ring; with the server away, the lease lapses by itself and the
        dispatcher hands this consumer's events to the others."""
        self.ctx.runtime.heartbeat.remove(self.id)
        yield from self._dropping_ahead()
        with self.lock:
            ops = self.state.release(unhanded)
        yield from self._giving_up(ops)


__all__ = ["SharedReader"]
