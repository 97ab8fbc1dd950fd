"""A subscription's loop ended by an error nobody foresaw (a server reply no table knew, a
bug) is never a silent dead listener: the error is kept in `sub.error`, said in the log,
and the subscription is closed. On both clients."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from durables.aio.consumer import AsyncConsumer
from durables.consumer import Consumer

from .conftest import FAST, Connect

pytestmark = pytest.mark.both_clients


def test_a_listener_loop_ended_by_an_unexpected_error_sets_sub_error_and_closes(
    connect: Connect,
    server_url: str,
    namespace: str,
    client_kind: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    boom = RuntimeError("a reply no table foresaw")
    armed = threading.Event()
    if client_kind == "aio":
        original_async = AsyncConsumer.fetch

        async def failing_async(self: AsyncConsumer, timeout: float = 1.0) -> Any:
            if armed.is_set():
                raise boom
            return await original_async(self, timeout)

        monkeypatch.setattr(AsyncConsumer, "fetch", failing_async)
    else:
        original = Consumer.fetch

        def failing(self: Consumer, timeout: float = 1.0) -> Any:
            if armed.is_set():
                raise boom
            return original(self, timeout)

        monkeypatch.setattr(Consumer, "fetch", failing)
    with connect(server_url, namespace=namespace, **FAST) as client:
        channel = client.channel("orders")
        got: list[Any] = []
        sub = channel.durable("billing", kind="shared").subscribe(got.append)
        channel.publish("first")
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [e.text for e in got] == ["first"]
        armed.set()
        assert sub.wait(10), "the listener loop did not end"
        assert sub.error is boom
        assert sub.closed
