"""The asyncio readers: exclusive (a lease, cumulative ack) and shared/serial (dealt by the
Lua dispatcher). What to send and what a reply means is decided by the same state
machines as the sync readers (`ops.exclusive.ExclusiveCursor`, `ops.shared.SharedHandout`);
these classes only await what the machines ask for. The read loops (fence, wait, attach
again after an outage) mirror `durables.exclusive` and `durables.shared` step for step.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConnectionLostError, DurableInUseError, LeaseLostError
from ..leases import Lease, LeaseHolder
from ..ops.exclusive import ExclusiveCursor
from ..ops.shared import SharedHandout

if TYPE_CHECKING:
    from ..events import Event
    from ..keys import ChannelKeys
    from ..ops.base import Op
    from ..selector import Selector
    from .context import AsyncContext

log = logging.getLogger(__name__)


class AsyncReader(Protocol):
    """The server side of one attached asyncio consumer (see `durables.consumer.Reader`)."""

    stops_on_error: bool
    notices: list[str]

    @property
    def discarded(self) -> int: ...

    async def attach(self) -> None: ...

    async def read(self, timeout: float) -> list[Event]: ...

    async def commit(
        self, events: Sequence[Event], *, defer: bool = False, retry: bool = True
    ) -> None: ...

    def ack(
        self, event: Event, outstanding: list[Event], *, defer: bool = False
    ) -> tuple[list[Op[Any]], list[Event]]:
        """The state changes at once; the operations to send (none when `defer`red to the
        next read), and what stays outstanding."""

    def flush(self) -> list[Op[Any]]:
        """The deferred acknowledgements, to send now."""

    def rollback(self, events: Sequence[Event], delay_s: float = 0.0) -> list[Op[Any]]: ...

    async def send(self, ops: Sequence[Op[Any]]) -> None:
        """Send acks or rollbacks `ack`/`rollback` asked for."""

    async def release(self, unhanded: Sequence[Event]) -> None: ...


class AsyncExclusiveReader(LeaseHolder):
    """The one consumer attached to an exclusive durable."""

    stops_on_error = True

    def __init__(
        self, ctx: AsyncContext, k: ChannelKeys, durable: str, name: str,
        selectors: list[Selector],
    ) -> None:  # fmt: skip
        self.ctx = ctx
        self.k = k
        self.notices: list[str] = []
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

    async def attach(self) -> None:
        self._epoch = self.ctx.executor.epoch
        self.state.on_attach(await self.ctx.executor.run(self.state.attach()))
        self.ctx.runtime.heartbeat.add(Lease(self.token, self.state.renew(), self._on_lost))

    async def _reattach(self) -> None:
        epoch = self.ctx.executor.epoch
        try:
            counts = await self.ctx.executor.run(self.state.attach(), retry=False)
        except DurableInUseError as exc:
            raise LeaseLostError(f"{self._context}: this consumer lost its lease ({exc})") from exc
        self.state.on_reattach(counts)
        self._epoch, self._lost = epoch, False
        self.ctx.runtime.heartbeat.add(Lease(self.token, self.state.renew(), self._on_lost))

    async def read(self, timeout: float) -> list[Event]:
        deadline = self.ctx.clock() + timeout
        while True:
            try:
                if self._lost or self._epoch != self.ctx.executor.epoch:
                    await self._reattach()
                try:
                    return await self._read(deadline)
                except LeaseLostError:
                    self._lost = True
            except ConnectionLostError:
                if not await self.ctx.executor.recover(until=deadline):
                    return []

    async def _read(self, deadline: float) -> list[Event]:
        clock, executor = self.ctx.clock, self.ctx.executor
        while True:
            ops = self.state.read()
            try:
                replies = await executor.run_all(ops, retry=False)
            except BaseException:
                self.state.read_failed()
                raise
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
            entries = await executor.run(self.state.wait(seconds), retry=False)
            if entries:
                return self.state.events(entries)

    async def commit(
        self, events: Sequence[Event], *, defer: bool = False, retry: bool = True
    ) -> None:
        op = self.state.commit(events, defer=defer)
        if op is not None:
            await self.ctx.executor.run(op, retry=retry)
            self.ctx.touch(self.k.channel)

    def ack(
        self, event: Event, outstanding: list[Event], *, defer: bool = False
    ) -> tuple[list[Op[Any]], list[Event]]:
        op, left = self.state.ack(event, outstanding, defer=defer)
        return ([] if op is None else [op]), left

    def flush(self) -> list[Op[Any]]:
        op = self.state.flush()
        return [] if op is None else [op]

    def rollback(self, events: Sequence[Event], delay_s: float = 0.0) -> list[Op[Any]]:
        op = self.state.rollback(events)
        return [] if op is None else [op]

    async def send(self, ops: Sequence[Op[Any]]) -> None:
        await self.ctx.executor.run_all(ops)
        self.ctx.touch(self.k.channel)

    async def release(self, unhanded: Sequence[Event]) -> None:
        self.ctx.runtime.heartbeat.remove(self.token)
        with contextlib.suppress(LeaseLostError):
            await self.ctx.executor.run_all(self.state.release(unhanded), retry=False)
        self.ctx.touch(self.k.channel)


class AsyncSharedReader(LeaseHolder):
    """One consumer attached to a shared or serial durable."""

    stops_on_error = False

    def __init__(
        self,
        ctx: AsyncContext,
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
        self._on_notice = on_notice
        self.window = window
        self.id = f"{name}#{secrets.token_hex(4)}"
        self.state = SharedHandout(k, durable, kind, self.id, window=window,
                                   lease_ms=ctx.lease_ms, selector=selector)  # fmt: skip
        self._context = self.state.context
        self._epoch = 0

    @property
    def discarded(self) -> int:
        return self.state.discarded

    async def attach(self, *, retry: bool = True) -> None:
        epoch = self.ctx.executor.epoch
        self.state.on_attach(await self.ctx.executor.run(self.state.attach(), retry=retry))
        self._epoch, self._lost = epoch, False
        self.ctx.runtime.heartbeat.add(Lease(self.id, self.state.renew(), self._on_lost))

    async def read(self, timeout: float) -> list[Event]:
        deadline = self.ctx.clock() + timeout
        while True:
            try:
                if self._lost or self._epoch != self.ctx.executor.epoch:
                    await self.attach(retry=False)
                try:
                    return await self._read(deadline)
                except LeaseLostError:
                    self._lost = True
            except ConnectionLostError:
                if not await self.ctx.executor.recover(until=deadline):
                    return []

    async def _read(self, deadline: float) -> list[Event]:
        clock, executor = self.ctx.clock, self.ctx.executor
        while True:
            block = min(deadline - clock(), self.ctx.settings.block_s)
            ops = self.state.fetch(block)
            try:
                replies = await executor.run_all(ops, retry=False)
            except BaseException:
                self.state.fetch_failed()
                raise
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
            await executor.run(wait, retry=False)

    def _notice(self, text: str) -> None:
        log.warning("%s: %s", self._context, text)
        self.notices.append(text)
        if self._on_notice is not None:
            self._on_notice(text)

    async def commit(
        self, events: Sequence[Event], *, defer: bool = False, retry: bool = True
    ) -> None:
        if not events:
            return
        self.state.commit(events)
        if not defer:
            ops = self.state.flush()
            if ops:
                await self.ctx.executor.run_all(ops, retry=retry)
                self.ctx.touch(self.k.channel)

    def ack(
        self, event: Event, outstanding: list[Event], *, defer: bool = False
    ) -> tuple[list[Op[Any]], list[Event]]:
        self.state.commit([event])
        return ([] if defer else self.state.flush()), [e for e in outstanding if e is not event]

    def flush(self) -> list[Op[Any]]:
        return self.state.flush()

    def rollback(self, events: Sequence[Event], delay_s: float = 0.0) -> list[Op[Any]]:
        op = self.state.rollback(events, delay_s)
        return [] if op is None else [op]

    async def send(self, ops: Sequence[Op[Any]]) -> None:
        await self.ctx.executor.run_all(ops)
        self.ctx.touch(self.k.channel)

    async def release(self, unhanded: Sequence[Event]) -> None:
        self.ctx.runtime.heartbeat.remove(self.id)
        await self.ctx.executor.run_all(self.state.release(unhanded), retry=False)
        self.ctx.touch(self.k.channel)


__all__ = ["AsyncExclusiveReader", "AsyncReader", "AsyncSharedReader"]
