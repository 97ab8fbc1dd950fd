"""Runs the asyncio client behind the sync API, so the behaviour tests run on both.

An event loop runs on a thread of its own; every call on a wrapped object runs on that
loop (a coroutine or other awaitable it returns is awaited there), and what comes back is
wrapped again: the asyncio client's objects, redis-py's asyncio client and events (whose
`ack()` returns an awaitable from the asyncio client). `with` becomes `async with`, and
iterating an object becomes `async for`. Listeners pass through as they are: the asyncio
client calls plain functions too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, TypeVar

import durables.aio as aio
from durables.events import Event

T = TypeVar("T")
WRAPPED = ("durables.aio", "durables.io.aio", "redis.asyncio")
CALL_TIMEOUT_S = 120.0
"""No call of the behaviour tests takes this long: a hang fails the test instead."""


class Bridge:
    """An event loop on a thread, and the proxies of the objects living on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="aio-bridge", daemon=True
        )
        self._thread.start()
        self._proxies: dict[int, tuple[object, Proxy]] = {}
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(CALL_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise AssertionError(f"the asyncio client hung for {CALL_TIMEOUT_S} s") from None

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        async def on_the_loop() -> Any:
            result = fn(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            return result

        return self.wrap(self.run(on_the_loop()))

    def wrap(self, value: Any) -> Any:
        if type(value) is list:
            return [self.wrap(v) for v in value]
        if type(value) is tuple:
            return tuple(self.wrap(v) for v in value)
        if inspect.isasyncgen(value):  # `consumer.events(...)`: iterated as `async for`
            return Proxy(self, value)
        if isinstance(value, Event) or type(value).__module__.startswith(WRAPPED):
            with self._lock:  # one proxy per object, so `in` and `is` work as on the sync API
                known = self._proxies.get(id(value))
                if known is None or known[0] is not value:
                    known = (value, Proxy(self, value))
                    self._proxies[id(value)] = known
            return known[1]
        return value

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def unwrap(value: Any) -> Any:
    return object.__getattribute__(value, "_target") if isinstance(value, Proxy) else value


class Proxy:
    """An asyncio object seen through the sync API."""

    def __init__(self, bridge: Bridge, target: object) -> None:
        object.__setattr__(self, "_bridge", bridge)
        object.__setattr__(self, "_target", target)

    def __getattr__(self, name: str) -> Any:
        bridge: Bridge = object.__getattribute__(self, "_bridge")
        value = getattr(object.__getattribute__(self, "_target"), name)
        if callable(value) and not isinstance(value, type):

            def call(*args: Any, **kwargs: Any) -> Any:
                args = tuple(unwrap(a) for a in args)
                kwargs = {k: unwrap(v) for k, v in kwargs.items()}
                return bridge.call(value, *args, **kwargs)

            return call
        return bridge.wrap(value)

    def __repr__(self) -> str:
        return repr(object.__getattribute__(self, "_target"))

    def __enter__(self) -> Any:
        target = object.__getattribute__(self, "_target")
        return object.__getattribute__(self, "_bridge").call(target.__aenter__)

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        target = object.__getattribute__(self, "_target")
        object.__getattribute__(self, "_bridge").call(target.__aexit__, t, e, tb)

    def __iter__(self) -> Iterator[Any]:
        bridge: Bridge = object.__getattribute__(self, "_bridge")
        events = object.__getattribute__(self, "_target").__aiter__()
        while True:
            try:
                yield bridge.call(events.__anext__)
            except StopAsyncIteration:
                return


class BridgedClient:
    """`aio.connect(...)` behind the sync API, as a context manager like `durables.connect`."""

    def __init__(self, url: str, **settings: Any) -> None:
        self.bridge = Bridge()
        try:
            self.client: Any = self.bridge.call(aio.connect, url, **settings)
        except BaseException:
            self.bridge.close()
            raise

    def __enter__(self) -> Any:
        return self.client

    def __exit__(self, *exc: object) -> None:
        try:
            self.client.close()
        finally:
            self.bridge.close()


def connect(url: str, **settings: Any) -> BridgedClient:
    return BridgedClient(url, **settings)
