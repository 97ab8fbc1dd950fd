"""The asyncio executor: the one place the asyncio client talks to the server.

The same contract as `durables.executor.Executor`, awaited: the same wire form of every
operation (`executor.wire`), the same parsing and error translation (`executor.parse_all`),
EVALSHA with a reload after NOSCRIPT, pipelines for several operations, and the same
outage behaviour: `run` waits an outage out (backoff with jitter, probing with a short
timeout) for `reconnect_timeout_s`, then the state is "closed"; every reconnection loads
the scripts again and increments `epoch`, so readers attach again.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from redis.exceptions import NoScriptError, RedisError, ResponseError

from .. import scripts
from ..errors import ConnectionLostError
from ..executor import (
    FIRST_BACKOFF_S,
    LOST,
    MAX_BACKOFF_S,
    State,
    StateListener,
    lost,
    parse_all,
    wire,
)
from ..ops.flows import Flow, Recover, Send, step
from ..replies import translate

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from ..ops.base import Op

log = logging.getLogger(__name__)
T = TypeVar("T")


class AsyncExecutor:
    """Sends operations over one asyncio redis-py pool; `probe` answers "is it back?" fast."""

    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        reconnect_timeout_s: float = 0.0,
        probe: aioredis.Redis | None = None,
    ) -> None:
        self.redis = redis
        self.reconnect_timeout_s = reconnect_timeout_s
        self._probe = probe or redis
        self.epoch = 0
        """Incremented at every reconnection (and script reload after a NOSCRIPT)."""
        self._state: State = "connected"
        self._outage_since = 0.0
        self._listeners: list[StateListener] = []

    @property
    def state(self) -> State:
        return self._state

    def on_state(self, listener: StateListener) -> None:
        """Call `listener(old, new)` at every change of state."""
        self._listeners.append(listener)

    def _set_state(self, new: State, *, quiet: bool = False) -> None:
        old, self._state = self._state, new
        if old == new:
            return
        level = logging.DEBUG if quiet else logging.INFO if new == "connected" else logging.WARNING
        log.log(level, "server connection: %s -> %s", old, new)
        for listener in list(self._listeners):
            try:
                listener(old, new)
            except Exception:
                log.exception("state listener failed on %s -> %s", old, new)

    # -- sending --------------------------------------------------------------------------

    async def run(self, op: Op[T], *, retry: bool = True) -> T:
        """Send one operation and parse its reply (see `Executor.run`)."""
        while True:
            try:
                result: T = (await self._run_all_once([op]))[0]
                return result
            except ConnectionLostError:
                if not retry:
                    self.lost_connection()
                    raise
                await self.recover()

    async def run_all(self, ops: Sequence[Op[Any]], *, retry: bool = True) -> list[Any]:
        """Send operations in one pipeline, in order; parsed replies (see `Executor.run_all`)."""
        while True:
            try:
                return await self._run_all_once(ops)
            except ConnectionLostError:
                if not retry:
                    self.lost_connection()
                    raise
                await self.recover()

    async def _run_all_once(self, ops: Sequence[Op[Any]]) -> list[Any]:
        context = ops[0].context if ops else ""
        try:
            if len(ops) == 1:
                replies = [await self._send_capturing(ops[0])]
                if isinstance(replies[0], NoScriptError):
                    await self._reloaded()
                    replies = [await self._send_capturing(ops[0])]
            else:
                pipe = self.redis.pipeline(transaction=False)
                for op in ops:
                    pipe.execute_command(*wire(op))
                replies = await pipe.execute(raise_on_error=False)
                for i, reply in enumerate(replies):
                    if isinstance(reply, NoScriptError):
                        await self._reloaded()
                        replies[i] = await self._send_capturing(ops[i])
        except LOST as exc:
            raise lost(exc, context) from exc
        return parse_all(ops, replies)

    async def _send_capturing(self, op: Op[Any]) -> Any:
        try:
            return await self.redis.execute_command(*wire(op))  # type: ignore[no-untyped-call]
        except ResponseError as exc:
            return exc

    async def drive(self, flow: Flow[T]) -> T:
        """Run a flow (`ops.flows`) to its end, awaiting each effect it yields."""
        result: Any = None
        error: BaseException | None = None
        while True:
            try:
                effect = step(flow, result, error)
            except StopIteration as done:
                value: T = done.value
                return value
            result, error = None, None
            try:
                if isinstance(effect, Send):
                    result = await self.run_all(effect.ops, retry=effect.retry)
                elif isinstance(effect, Recover):
                    result = await self.recover(effect.until)
                else:
                    result = effect.function(*effect.args)
                    if inspect.isawaitable(result):
                        result = await result
            except BaseException as exc:  # thrown into the flow at its `yield`
                error = exc

    # -- scripts --------------------------------------------------------------------------

    async def load_scripts(self) -> None:
        """Load every script in one round trip: at connect and after every reconnection."""
        try:
            pipe = self.redis.pipeline(transaction=False)
            for name in scripts.NAMES:
                pipe.script_load(scripts.source(name))
            await pipe.execute()
        except LOST as exc:
            raise lost(exc, "loading scripts") from exc
        except ResponseError as exc:
            raise translate(exc, "loading scripts") from exc

    async def _reloaded(self) -> None:
        await self.load_scripts()
        self.epoch += 1

    # -- outages --------------------------------------------------------------------------

    def lost_connection(self) -> None:
        """Note the start of an outage (state "reconnecting"), if not noted yet."""
        if self._state == "connected":
            self._outage_since = time.monotonic()
            self._set_state("reconnecting")

    async def recover(self, until: float | None = None) -> bool:
        """Wait until the server answers again (see `Executor.recover`)."""
        self.lost_connection()
        delay = FIRST_BACKOFF_S
        while True:
            if self._state == "connected":
                return True
            deadline = self._outage_since + self.reconnect_timeout_s
            if await self._answers():
                await self._reconnected()
                return True
            now = time.monotonic()
            if now >= deadline:
                self._set_state("closed")
                raise ConnectionLostError(
                    f"the server did not answer for {self.reconnect_timeout_s:g} s "
                    f"(reconnect_timeout_s); giving up"
                )
            if until is not None and now >= until:
                return False
            stop = deadline if until is None else min(deadline, until)
            await asyncio.sleep(max(0.0, min(delay * random.uniform(0.5, 1.5), stop - now)))
            delay = min(delay * 2, MAX_BACKOFF_S)

    async def _answers(self) -> bool:
        try:
            return bool(await self._probe.ping())
        except (RedisError, OSError):
            return False

    async def _reconnected(self) -> None:
        await self.redis.connection_pool.disconnect(inuse_connections=False)
        try:
            await self.load_scripts()
        except ConnectionLostError:
            return  # gone again: the next call starts over
        if self._state != "connected":
            self.epoch += 1
            self._set_state("connected")

    async def interrupt(self) -> None:
        """Break every connection of the pool, in use or not (see `Executor.interrupt`)."""
        self.lost_connection()
        await self.redis.connection_pool.disconnect(inuse_connections=True)

    async def close(self) -> None:
        self._set_state("closed", quiet=True)
        await self.redis.aclose()
        if self._probe is not self.redis:
            await self._probe.aclose()


__all__ = ["AsyncExecutor"]
