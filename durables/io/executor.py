"""The one place that sends operations to the server, and rides through outages.

Everything else builds `Op`s (pure data) and reads typed results. Here alone:
EVALSHA with a reload after NOSCRIPT (a restarted server has no scripts), pipelining
several operations into one round trip, every server error and broken socket turned
into our error by what it means (`durables.verdicts`), and reconnection: after a dropped
connection, a timeout or a server restart, calls wait (exponential backoff with jitter,
probing with a short timeout) until the server answers again, for at most
`reconnect_timeout_s` from the start of the outage; then the state is "closed" and they
raise. The loop that sends again is `recovery.attempts`, which the asyncio executor drives
too.

Each reconnection increments `epoch`: readers that kept a position on the server
(a lease, a cursor) compare it with theirs and attach again before going on.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from redis.exceptions import NoScriptError, RedisError, ResponseError

from .. import scripts
from ..errors import ConnectionLostError
from ..ops.flows import Collect, Effect, Flow, Post, Posted, Recover, Send, walk
from ..reply_parsers import error_word, kept
from ..verdicts import error_for
from . import cluster
from .connections import Connections, wake_pool
from .recovery import (
    Attempt,
    Link,
    Moves,
    Pause,
    Probe,
    Renew,
    State,
    StateListener,
    Step,
    WaitStep,
    attempts,
    waiting,
)

if TYPE_CHECKING:
    from ..ops.base import Op
    from .cluster import Server

log = logging.getLogger(__name__)
T = TypeVar("T")


def wire(op: Op[Any]) -> tuple[Any, ...]:
    """The command as sent: a script call as EVALSHA with the script's SHA1. Both executors
    (sync and asyncio) send exactly this."""
    return op.wire(scripts.sha(op.script)) if op.script is not None else op.args


def parse_all(ops: Sequence[Op[Any]], replies: Sequence[Any]) -> list[Any]:
    """Replies of a pipeline (error replies as `ResponseError`s) parsed in order; the first
    error not tolerated by its operation raised as ours. Shared by both executors."""
    for op, reply in zip(ops, replies, strict=True):
        if isinstance(reply, ResponseError) and not tolerated(op, reply):
            raise error_for(reply, op.context, op.script) from None
    return [op.parse(reply) for op, reply in zip(ops, replies, strict=True)]


def tolerated(op: Op[Any], reply: ResponseError) -> bool:
    """An error reply that goes to the operation's parser: one of its `tolerate` words,
    whatever it means elsewhere (a blocked read through a tap or a gate woken by its
    deletion answers UNBLOCKED, which is an outage for any other command)."""
    return error_word(reply)[0] in op.tolerate


ServerT = TypeVar("ServerT")
DirectT = TypeVar("DirectT")


class ExecutorCore(ABC, Generic[ServerT, DirectT]):
    """What both executors are alike: the connection state they report (`recovery.Link`),
    a flow's effects dispatched, and an outage waited out (`recovery.waiting`); each
    carries the steps out its own way (blocking, or a coroutine to await).

    `probe` is a client with a short socket timeout, used to find out whether the server
    answers again (a black-holed connection would otherwise hold a probe for the whole
    socket timeout); without one the pool itself is probed. `reports`: whether changes of
    state are logged (not for a helper's executor, the heartbeat's: the client's reports).
    """

    def __init__(
        self,
        redis: ServerT,
        *,
        reconnect_timeout_s: float = 0.0,
        probe: ServerT | None = None,
        reports: bool = True,
    ) -> None:
        self.redis = redis
        self._probe = probe or redis
        self.link = Link(reconnect_timeout_s, self._state_lock(), reports=reports)
        self.moves = Moves()
        self._direct: DirectT | None = self._direct_connections(redis)
        """Connections of our own to a standalone server (None on a cluster)."""
        self._scripts: tuple[str, ...] = scripts.NAMES
        """The scripts loaded at connect and again after every reconnection or NOSCRIPT."""
        self._adding = self._state_lock() or contextlib.nullcontext()
        """Held while a connector's scripts are added (`add_scripts`)."""

    def _state_lock(self) -> AbstractContextManager[Any] | None:
        """What guards the link's state: nothing, unless many threads send."""
        return None

    @property
    def epoch(self) -> int:
        """Incremented at every reconnection (and script reload after a NOSCRIPT)."""
        return self.link.epoch

    @property
    def state(self) -> State:
        return self.link.state

    def on_state(self, listener: StateListener) -> None:
        """Call `listener(old, new)` at every change of state."""
        self.link.on_state(listener)

    def lost_connection(self) -> None:
        """Note the start of an outage (state "reconnecting"), if not noted yet."""
        self.link.lost()

    def _perform(self, effect: Effect) -> Any:
        """A flow's effect carried out: its result (or, in the asyncio executor, a coroutine
        the driver awaits). A reader's wait after `ConnectionLostError` is `recover`, unless
        nothing was lost (a `SlotMovingError`: the connection is up, and the executor
        paused already)."""
        if isinstance(effect, Send):
            return self.run_all(effect.ops, retry=effect.retry)
        if isinstance(effect, Post):
            return self.post_all(effect.ops)
        if isinstance(effect, Collect):
            return self.collect(effect.posted)
        if isinstance(effect, Recover):
            if self.link.connected:
                return effect.until is None or time.monotonic() < effect.until
            return self.recover(effect.until)
        return effect.function(*effect.args)

    def _waiting_step(self, step: WaitStep) -> Any:
        """A step of `recovery.waiting`, carried out (or under way)."""
        if isinstance(step, Probe):
            return self._answers()
        if isinstance(step, Renew):
            return self._reconnected()
        return self._sleep(step.seconds)

    def _adding_scripts(self, names: Sequence[str]) -> list[str]:
        """Those of `names` not loaded before, reloaded with the library's own from now on;
        the ones to load now (none in an outage: the reconnection loads them)."""
        new = [name for name in names if name not in self._scripts]
        self._scripts = (*self._scripts, *new)
        return new if self.link.connected else []

    @abstractmethod
    def _direct_connections(self, redis: ServerT) -> DirectT | None:
        """The connections to send over (None on a cluster: through its client)."""

    @abstractmethod
    def run_all(self, ops: Sequence[Op[Any]], *, retry: bool = True) -> Any:
        """Send operations in one pipeline (one round trip), in order; parsed replies."""

    @abstractmethod
    def post_all(self, ops: Sequence[Op[Any]]) -> Any:
        """Send operations in one pipeline and leave the replies to `collect` (a `Posted`;
        what went wrong is raised there)."""

    @abstractmethod
    def collect(self, posted: Posted) -> Any:
        """The parsed replies of a `post_all` (as `run_all` without `retry`)."""

    def _eager(self) -> bool:
        """Whether `post_all` sends the pipeline whole at once (and keeps its outcome): on a
        cluster (its client reads every reply), or while the link is not up (`run_all`
        knows what to do then)."""
        return self._direct is None or not self.link.connected

    def _collect_failed(self, exc: RedisError, posted: Posted) -> BaseException:
        """Our error for a collected pipeline's failure; an outage noted, as `run_all`
        without `retry` does."""
        error = error_for(exc, posted.ops[0].context if posted.ops else "")
        if isinstance(error, ConnectionLostError):
            self.link.lost()
        return error

    @abstractmethod
    def recover(self, until: float | None = None) -> Any:
        """Wait until the server answers again (`recovery.waiting`)."""

    @abstractmethod
    def _answers(self) -> Any:
        """Whether the probe hears the server."""

    @abstractmethod
    def _reconnected(self) -> Any:
        """The server answers again: the pool renewed and the scripts loaded."""

    @abstractmethod
    def _sleep(self, seconds: float) -> Any:
        """A pause of the recovery's backoff."""


def script_loads(pipe: Any, names: Sequence[str]) -> Any:
    """`pipe` with each named script's `SCRIPT LOAD` on it (one round trip at connect and
    after every reconnection, so no pipeline meets a NOSCRIPT)."""
    for name in names:
        pipe.script_load(scripts.source(name))
    return pipe


def script_sources(names: Sequence[str]) -> list[str]:
    """The named scripts' sources, for loading on each primary of a cluster."""
    return [scripts.source(name) for name in names]


class Executor(ExecutorCore["Server", Connections]):
    """Sends operations over one redis-py connection pool (thread-safe, as the pool is).

    See `ExecutorCore` for `probe` and `reports`.
    """

    def _state_lock(self) -> AbstractContextManager[Any]:
        return threading.Lock()

    def _direct_connections(self, redis: Server) -> Connections | None:
        return None if isinstance(redis, cluster.RedisCluster) else Connections(redis)

    # -- sending --------------------------------------------------------------------------

    def run(self, op: Op[T], *, retry: bool = True) -> T:
        """Send one operation and parse its reply; our errors for error replies.

        With `retry`, a lost connection is waited out (see `recover`) and the operation
        sent again; without, `ConnectionLostError` is raised at once (`recovery.attempts`).
        """
        self.link.check_open()
        if self.link.connected:  # the way almost every call goes: once, no plan
            try:
                return self._run_once(op)
            except ConnectionLostError as exc:
                return self._retrying(lambda: self._run_once(op), retry, op.context, exc)  # type: ignore[no-any-return]
        return self._retrying(lambda: self._run_once(op), retry, op.context)  # type: ignore[no-any-return]

    def run_all(self, ops: Sequence[Op[Any]], *, retry: bool = True) -> list[Any]:
        """Send operations in one pipeline (one round trip), in order; parsed replies.

        Every operation runs even if an earlier one fails; then the first error reply is
        raised. A script the server did not know is loaded and only that call is sent
        again, so nothing else in the pipeline runs twice. `retry` as for `run`.
        """
        self.link.check_open()
        context = ops[0].context if ops else ""
        if self.link.connected:
            try:
                return self._run_all_once(ops)
            except ConnectionLostError as exc:
                return self._retrying(lambda: self._run_all_once(ops), retry, context, exc)  # type: ignore[no-any-return]
        return self._retrying(lambda: self._run_all_once(ops), retry, context)  # type: ignore[no-any-return]

    def _retrying(
        self,
        once: Callable[[], Any],
        retry: bool,
        context: str,
        failed: ConnectionLostError | None = None,
    ) -> Any:
        """`once` through an outage or a moving slot: `recovery.attempts`, carried out blocking."""
        plan = attempts(self.link, self.moves, retry, context, failed)
        return walk(plan, functools.partial(self._step, once))

    def _step(self, once: Callable[[], Any], step: Step) -> Any:
        if isinstance(step, Attempt):
            return once()
        if isinstance(step, Pause):
            if isinstance(self.redis, cluster.RedisCluster):
                cluster.refresh(self.redis)  # where the moving slot's keys are now
            time.sleep(step.seconds)
            return None
        return self.recover(step.until)

    def _run_once(self, op: Op[T]) -> T:
        try:
            try:
                reply = self._send(op)
            except NoScriptError:
                self._reloaded()
                reply = self._send(op)
        except ResponseError as exc:
            if not tolerated(op, exc):
                raise error_for(exc, op.context, op.script) from None
            reply = kept(exc)
        except RedisError as exc:  # a broken connection: `verdicts` says which outage
            raise error_for(exc, op.context) from None
        return op.parse(reply)

    def _run_all_once(self, ops: Sequence[Op[Any]]) -> list[Any]:
        if len(ops) == 1:
            return [self._run_once(ops[0])]
        context = ops[0].context if ops else ""
        try:
            replies = self._pipeline([self._wire(op) for op in ops])
            self._rescued(ops, replies)
        except RedisError as exc:  # an outage, or a script stopped at a moved key
            raise error_for(exc, context) from None
        return parse_all(ops, replies)

    def post_all(self, ops: Sequence[Op[Any]]) -> Posted:
        posted = Posted(ops, [self._wire(op) for op in ops])
        if self._eager():
            try:
                posted.replies = self.run_all(ops, retry=False)
            except Exception as exc:
                posted.error = exc
            return posted
        assert self._direct is not None
        try:
            posted.conn = self._direct.post(posted.wired)
        except RedisError as exc:
            posted.error = self._collect_failed(exc, posted)
        return posted

    def collect(self, posted: Posted) -> list[Any]:
        if posted.conn is None:
            return posted.outcome()
        assert self._direct is not None
        conn, posted.conn = posted.conn, None
        try:
            replies = self._direct.collect(conn, posted.wired)
            self._rescued(posted.ops, replies)
        except RedisError as exc:
            raise self._collect_failed(exc, posted) from None
        return parse_all(posted.ops, replies)

    def _rescued(self, ops: Sequence[Op[Any]], replies: list[Any]) -> None:
        """A script the server did not know, in a pipeline's `replies`: the scripts
        loaded, and only that call sent again."""
        for i, reply in enumerate(replies):
            if isinstance(reply, NoScriptError):
                self._reloaded()
                replies[i] = self._send_capturing(ops[i])

    # The two senders ask whether there are direct connections, not `isinstance` of
    # redis-py's `RedisCluster`: that class is a `typing.Protocol`'s, and the check costs
    # 0.85 µs per round trip for a client that is not one.
    def _pipeline(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        if self._direct is not None:
            return self._direct.pipeline(commands)
        return cluster.pipeline(cast("cluster.RedisCluster", self.redis), commands)

    _wire = staticmethod(wire)

    def _send(self, op: Op[Any]) -> Any:
        if self._direct is not None:
            return self._direct.call(self._wire(op))
        return cluster.send(cast("cluster.RedisCluster", self.redis), self._wire(op))

    def _send_capturing(self, op: Op[Any]) -> Any:
        try:
            return self._send(op)
        except ResponseError as exc:
            return kept(exc)

    def drive(self, flow: Flow[T]) -> T:
        """Run a flow (`ops.flows`) to its end, performing each effect it yields."""
        return walk(flow, self._perform)

    # -- scripts --------------------------------------------------------------------------

    def load_scripts(self) -> None:
        """Load every script in one round trip, so no pipeline meets a NOSCRIPT: done at
        connect and after every reconnection."""
        self._load(self._scripts)

    def add_scripts(self, names: Sequence[str]) -> None:
        """Load a connector's scripts (`scripts.names_in`) now, and again with the library's
        own after every reconnection or NOSCRIPT; nothing to do if they were added before.
        In an outage they are loaded by the reconnection the next call waits for."""
        with self._adding:  # uncontended, ~0.1 µs: no call sends them before they are loaded
            new = self._adding_scripts(names)
            if new:
                with contextlib.suppress(ConnectionLostError):
                    self._load(new)

    def _load(self, names: Sequence[str]) -> None:
        try:
            if isinstance(self.redis, cluster.RedisCluster):  # on every primary
                cluster.load_scripts(self.redis, script_sources(names))
                return
            script_loads(self.redis.pipeline(transaction=False), names).execute()
        except RedisError as exc:
            raise error_for(exc, "loading scripts") from None

    def _reloaded(self) -> None:
        """The server lost its scripts (a restart or failover the pool did not notice):
        load them all; readers treat it as a reconnection, since commands pipelined
        after the missing script already ran."""
        self.load_scripts()
        self.link.reloaded()

    # -- outages --------------------------------------------------------------------------

    def recover(self, until: float | None = None) -> bool:
        """Wait until the server answers again: True once it does (the pool is renewed and
        the scripts loaded). False if `until` (a monotonic time) came first; past
        `reconnect_timeout_s` since the outage began, the state becomes "closed" and
        `ConnectionLostError` is raised."""
        return walk(waiting(self.link, until), self._waiting_step)

    def _sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def _answers(self) -> bool:
        if isinstance(self._probe, cluster.RedisCluster):
            return cluster.answers(self._probe)
        try:
            return bool(self._probe.ping())
        except (RedisError, OSError):
            return False

    def _reconnected(self) -> None:
        if isinstance(self.redis, cluster.RedisCluster):
            cluster.refresh(self.redis)  # a failover may have moved slots to other nodes
        self._disconnect(inuse_connections=False)  # no stale sockets
        try:
            self.load_scripts()
        except ConnectionLostError:
            return  # gone again: the next call starts over
        self.link.reconnected()

    def interrupt(self) -> None:
        """Break every connection of the pool, in use or not: a thread blocked on a
        black-holed socket wakes with an error at once and starts reconnecting."""
        self.lost_connection()
        self._disconnect(inuse_connections=True)

    def _disconnect(self, *, inuse_connections: bool) -> None:
        """Idle connections closed; with `inuse_connections` the busy ones woken, not
        closed (`connections.wake`: their threads close them)."""
        if isinstance(self.redis, cluster.RedisCluster):
            cluster.disconnect(self.redis, inuse_connections=inuse_connections)
        elif inuse_connections:
            wake_pool(self.redis.connection_pool)
        else:
            self.redis.connection_pool.disconnect(inuse_connections=False)
        if self._direct is not None:
            self._direct.disconnect(in_use=inuse_connections)

    def close(self) -> None:
        self.link.close()
        self.redis.close()
        if self._direct is not None:
            self._direct.close()
        if self._probe is not self.redis:
            self._probe.close()


__all__ = [
    "Executor",
    "ExecutorCore",
    "State",
    "parse_all",
    "script_loads",
    "script_sources",
    "tolerated",
    "wire",
]
