"""Multi-step sequences written once for both clients: generators that yield effects.

A read loop (attach again after an outage, fetch, wait, fetch again) or a session's
delivery round is more than one operation, with decisions between them. Written as a
generator, it yields what it needs done (`Send` operations, `Recover` from an outage,
`Call` the application's code) and receives the result, or has the error thrown in at the
`yield`. The sync executor's `drive` performs each effect by blocking (`walk`), the
asyncio executor's by awaiting (`walk_awaited`); the sequence itself, its retries and its
state changes, exists once. Nothing here does I/O (the model is the sans-I/O protocol
libraries, h11 and the like, with a generator in place of an explicit state machine).

A flow is used as `replies = yield from send(ops)`, `ok = yield from recover(until)`,
`yield from call(listener.on_event, event)`; a flow that calls application code itself
(a session's delivery, once per event) hands only an awaitable result to the driver,
`yield from awaited(returned)`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from .base import Op

T = TypeVar("T")
S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Send:
    """Send `ops` in one round trip; the result is their parsed replies (`Executor.run_all`)."""

    ops: Sequence[Op[Any]]
    retry: bool = True


@dataclass(frozen=True, slots=True)
class Recover:
    """Wait out an outage until the monotonic time `until` (`Executor.recover`); the result
    is whether the server answers again."""

    until: float | None = None


@dataclass(frozen=True, slots=True)
class Post:
    """Send `ops` in one round trip and read the replies later: the result is a `Posted`
    for `Collect` (a read ahead: the server works on it while the application handles
    what came before). Never raises: what went wrong is raised at the `Collect`."""

    ops: Sequence[Op[Any]]


@dataclass(frozen=True, slots=True)
class Collect:
    """The parsed replies of a `Post`ed pipeline, read now (without a retry: an outage
    raises `ConnectionLostError`, as `Send` without `retry`)."""

    posted: Posted


@dataclass(slots=True)
class Posted:
    """A pipeline sent whose replies are still to be read: over `conn`, a connection held
    out of the free list until then; or, where the executor cannot leave replies unread
    (a cluster, an outage under way), sent whole at once, its `replies` or `error` kept."""

    ops: Sequence[Op[Any]]
    wired: Sequence[Any] = ()
    conn: Any = None
    replies: list[Any] | None = None
    error: BaseException | None = None

    def outcome(self) -> list[Any]:
        """The replies of a pipeline sent whole at once, or its error raised."""
        if self.error is not None:
            raise self.error
        return self.replies or []


@dataclass(frozen=True, slots=True)
class Call:
    """Call application code (a listener); the asyncio driver awaits what it returns when
    that is awaitable. The result is the call's."""

    function: Callable[..., Any]
    args: tuple[Any, ...] = ()


Effect: TypeAlias = Send | Recover | Call | Post | Collect
Flow: TypeAlias = Generator[Effect, Any, T]
"""A sequence that yields effects and returns a `T`."""


def send(ops: Sequence[Op[Any]], *, retry: bool = True) -> Flow[list[Any]]:
    replies: list[Any] = yield Send(ops, retry)
    return replies


def run(op: Op[T], *, retry: bool = True) -> Flow[T]:
    replies: list[Any] = yield Send((op,), retry)
    result: T = replies[0]
    return result


def post(ops: Sequence[Op[Any]]) -> Flow[Posted]:
    posted: Posted = yield Post(ops)
    return posted


def collect(posted: Posted) -> Flow[list[Any]]:
    replies: list[Any] = yield Collect(posted)
    return replies


def recover(until: float | None = None) -> Flow[bool]:
    answered: bool = yield Recover(until)
    return answered


def call(function: Callable[..., Any], *args: Any) -> Flow[Any]:
    return (yield Call(function, args))


def awaited(returned: Any) -> Flow[Any]:
    """What application code called by the flow itself returned, when that is awaitable
    (an async listener's coroutine): the asyncio driver awaits it and the result is the
    awaited value; the sync driver hands it back as it is."""
    return (yield Call(_same, (returned,)))


def _same(value: Any) -> Any:
    return value


def walk(gen: Generator[S, Any, T], perform: Callable[[S], Any]) -> T:
    """Run a generator to its end, blocking: each thing it yields (a flow's effect, a
    cluster plan's step in `routing`) is carried out by `perform`, and the outcome given
    back: the value sent in, or the error (any `BaseException`, an interrupt too) thrown in
    at the `yield`. The sync client's drivers of flows and plans are this loop."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = gen.send(value) if error is None else gen.throw(error)
        except StopIteration as done:
            result: T = done.value
            return result
        try:
            value, error = perform(step), None
        except BaseException as exc:  # thrown in at the next turn, outside this `except`
            value, error = None, exc


async def walk_awaited(gen: Generator[S, Any, T], perform: Callable[[S], Any]) -> T:
    """`walk` for the asyncio client: what `perform` returns is awaited when it is
    awaitable (a listener may be plain), and a cancellation is thrown in like any error.
    The same loop as `walk`, written twice only because one blocks and one awaits."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = gen.send(value) if error is None else gen.throw(error)
        except StopIteration as done:
            result: T = done.value
            return result
        try:
            value = perform(step)
            if inspect.isawaitable(value):
                value = await value
            error = None
        except BaseException as exc:
            value, error = None, exc


__all__ = [
    "Call",
    "Collect",
    "Effect",
    "Flow",
    "Post",
    "Posted",
    "Recover",
    "Send",
    "awaited",
    "call",
    "collect",
    "recover",
    "post",
    "run",
    "send",
    "walk",
    "walk_awaited",
]
