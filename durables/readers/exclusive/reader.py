"""The reader of an exclusive durable: one consumer at a time (a lease), in order,
cumulative acknowledgement. Its state machine is `cursor.ExclusiveCursor`, beside it; this
is the loop that sends what the cursor asks for, for both clients (`base.Reader`)."""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import TYPE_CHECKING, Any

from ...errors import DurableInUseError, LeaseLostError
from ...io.leases import Lease, waiting_out
from ...ops.flows import Flow, run
from ...server import processes
from ..base import C, Reader
from .cursor import ExclusiveCursor

if TYPE_CHECKING:
    from ...events import Event
    from ...keys import ChannelKeys
    from ...ops.base import Op
    from ...selector import Selector

log = logging.getLogger(__name__)


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


class ExclusiveReader(Reader[C]):
    """The one consumer attached to an exclusive durable: a lease, in order, cumulative
    acknowledgement."""

    stops_on_error = True

    def __init__(
        self,
        ctx: C,
        k: ChannelKeys,
        durable: str,
        name: str,
        selectors: list[Selector],
        lock: AbstractContextManager[Any],
    ) -> None:
        super().__init__(ctx, k, lock)
        self.token = (
            f"{name}@{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
            f":{processes.pid_scope()}"
        )
        """name@host:pid:random:scope, the scope telling whether a pid seen on one host
        means the same process (`processes.pid_scope`; see `holder_gone`)."""
        self.state: ExclusiveCursor = ExclusiveCursor(
            k,
            durable,
            self.token,
            lease_ms=ctx.lease_ms,
            batch=ctx.settings.read_batch,
            selectors=selectors,
        )
        self._context = self.state.context
        self.wait_s = 0.0
        """How long the first attach waits for another holder's lease to lapse (`wait=`)."""

    def _lease(self) -> Lease:
        return Lease(self.token, self.state.renew(), self._on_lost, on_held=self._on_held)

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
            log.warning(
                "%s: taking over from %s, whose process is gone (its lease had %.1f s left)",
                self._context,
                exc.holder,
                exc.lease_left_s or 0.0,
            )
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
            made = partial(self.state.read, block)
            ops, replies = yield from self._exchanging(made, self.state.read_failed, deadline)
            with self.lock:
                events, again = self.state.on_read(replies[: len(ops)])
            self._touched()
            if self._epoch != self.ctx.executor.epoch:
                if not (yield from self._reread(events)):  # then its pending list first
                    return []  # closed meanwhile
            elif events:
                return (yield from self._fenced(self._waited(replies, events)))
            elif again:
                continue
            elif replies[-1]:  # entries came, all skipped by the filter
                return []
            if deadline - clock() <= 0:
                return []

    def _reread(self, events: list[Event]) -> Flow[bool]:
        """A read that went out after a reconnection this consumer has not attached again
        since (made in the read's own round trip, or by another thread after `reading`
        looked): a read before the outage may have lost its reply, its events pending and
        never handed out, and a cumulative ack of these later ones would acknowledge them
        unseen. So these are withdrawn, and the attach reads the pending list first; False
        if the consumer is being closed (it attaches no more)."""
        self._withdraw(events)
        return (yield from self._attaching_again())

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

    def _release(self, unhanded: Sequence[Event]) -> Flow[None]:
        """Give up the lease; with the server away, it lapses by itself."""
        self.ctx.runtime.heartbeat.remove(self.token)
        with self.lock:
            ops = self.state.release(unhanded)
        yield from self._giving_up(ops)


__all__ = ["ExclusiveReader", "holder_gone"]
