"""The console's one reader: reads the figures every interval and hands them to the pages
and to every open event stream (server-sent events).

One read serves every browser, so ten open tabs cost the server what one does. Through
an outage it keeps trying: the streams say the server is unreachable (and since when),
and the first read that succeeds again brings the figures back. Rates are differences
of the server's counters between two reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

import durables.aio as aio

from ..errors import DurablesError
from ..figures import ChannelFigures, Figures

log = logging.getLogger(__name__)

RECONNECT_TIMEOUT_S = 2.0
"""How long one read waits out a lost connection before the outage is shown."""
READ_TIMEOUT_S = 10.0
"""A read that takes longer is abandoned, and shown as an outage."""
KEEPALIVE_S = 15.0
"""A comment line on an idle stream this often, so proxies keep it open."""


@dataclass
class Counters:
    """The counters of one read, for the rates of the next."""

    at: float
    added: dict[str, int] = field(default_factory=dict)
    acknowledged: dict[str, int] = field(default_factory=dict)
    durables: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    """(channel, durable) -> (delivered, acknowledged): counters."""


class Live:
    """Owns the console's asyncio client and the latest figures."""

    def __init__(self, url: str | None, namespace: str | None, interval_s: float = 1.0) -> None:
        self.url = url
        self.namespace = namespace
        self.interval_s = interval_s
        self.figures: Figures | None = None
        self.rates: dict[str, tuple[float, float]] = {}
        """Channel -> (events in per second, events acknowledged per second)."""
        self.durable_rates: dict[tuple[str, str], tuple[float, float]] = {}
        """(channel, durable) -> (events delivered per second, acknowledged per second)."""
        self.error: str | None = None
        self.down_since: float | None = None
        self.version = ""
        self._client: aio.AsyncClient | None = None
        self._counters: Counters | None = None
        self._streams: set[asyncio.Queue[str]] = set()
        self._task: asyncio.Task[None] | None = None

    # -- the client ---------------------------------------------------------------------

    @property
    def current(self) -> aio.AsyncClient | None:
        """The client now, if one is connected (for its URL)."""
        return self._client

    async def client(self) -> aio.AsyncClient:
        """The client, connected again when the last one gave up during an outage."""
        if self._client is not None and self._client.state == "closed":
            await self._drop_client()
        if self._client is None:
            settings: dict[str, object] = {"reconnect_timeout_s": RECONNECT_TIMEOUT_S}
            if self.namespace is not None:
                settings["namespace"] = self.namespace
            self._client = await aio.connect(self.url, **settings)
            self.version = self._client.server_version
        return self._client

    async def _drop_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(DurablesError, RedisError, OSError):
                await client.close()

    # -- reading ------------------------------------------------------------------------

    async def start(self) -> None:
        await self.read_once()
        self._task = asyncio.create_task(self._run(), name="durables-console-live")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._drop_client()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.read_once()

    async def read_once(self) -> None:
        """Read the figures now and tell every stream; an outage is shown, not raised."""
        try:
            client = await asyncio.wait_for(self.client(), READ_TIMEOUT_S)
            figures = await asyncio.wait_for(client.figures(), READ_TIMEOUT_S)
        except (DurablesError, RedisError, OSError, TimeoutError) as exc:
            if self.error is None:
                log.warning("durables console: cannot read the server: %s", exc)
                self.down_since = time.time()
            self.error = str(exc) or type(exc).__name__
            if self._client is not None and self._client.state != "connected":
                await self._drop_client()
        else:
            self._take(figures)
        self._publish(json.dumps(self.state()))

    def _take(self, figures: Figures) -> None:
        now = time.monotonic()
        counters = Counters(now)
        for channel in figures.channels:
            counters.added[channel.info.name] = channel.added
            counters.acknowledged[channel.info.name] = _acknowledged(channel)
            for d in channel.durables:
                counters.durables[(channel.info.name, d.info.name)] = (
                    d.delivered or 0,
                    d.acknowledged or 0,
                )
        last = self._counters
        if last is not None and now > last.at:
            span = now - last.at
            self.rates = {
                name: (
                    max(0, added - last.added.get(name, added)) / span,
                    max(
                        0,
                        counters.acknowledged[name]
                        - last.acknowledged.get(name, counters.acknowledged[name]),
                    )
                    / span,
                )
                for name, added in counters.added.items()
            }
            self.durable_rates = {
                at: _per_second(now_counts, last.durables.get(at, now_counts), span)
                for at, now_counts in counters.durables.items()
            }
        self._counters, self.figures, self.error, self.down_since = counters, figures, None, None

    # -- what the browser gets ----------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The figures as the pages' script reads them (plain JSON, user data as strings)."""
        if self.error is not None or self.figures is None:
            return {
                "up": False,
                "error": self.error or "not read yet",
                "down_since": self.down_since,
                "at": time.time(),
            }
        f = self.figures
        return {
            "up": True,
            "at": time.time(),
            "memory": f.server.get("used_memory_human"),
            "channels": {c.info.name: self._channel(c) for c in f.channels},
            "sessions": {
                s.record.id: {
                    "live": s.live,
                    "state": s.state,
                    "queue": s.queue_depth,
                    "keepalive_left_s": s.keepalive_left_s,
                }
                for s in f.sessions
            },
        }

    def _channel(self, c: ChannelFigures) -> dict[str, Any]:
        rate_in, rate_out = self.rates.get(c.info.name, (0.0, 0.0))
        durables = {
            d.info.name: {
                "depth": d.info.depth,
                "transaction_depth": d.info.transaction_depth,
                "lag": d.lag,
                "oldest_unacked_age_s": d.oldest_unacked_age_s,
                "consumers": len(d.info.consumers),
                "dead_letters": d.dead_letters,
            }
            for d in c.durables
        }
        return {
            "length": c.info.length,
            "rate_in": round(rate_in, 1),
            "rate_out": round(rate_out, 1),
            "retained_bytes": c.retained_bytes,
            "retained_by": c.retained_by,
            "durables": durables,
        }

    def _publish(self, message: str) -> None:
        for queue in list(self._streams):
            if queue.full():  # a stalled browser: it gets the newest, not a backlog
                with contextlib.suppress(asyncio.QueueEmpty):
                    queue.get_nowait()
            queue.put_nowait(message)

    async def stream(self) -> AsyncIterator[str]:
        """Server-sent events: the state now, then after every read, until the browser
        goes away (the response is cancelled)."""
        queue: asyncio.Queue[str] = asyncio.Queue(maxsize=2)
        self._streams.add(queue)
        try:
            yield f"data: {json.dumps(self.state())}\n\n"
            while True:
                try:
                    message = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                yield f"data: {message}\n\n"
        finally:
            self._streams.discard(queue)


def _per_second(now: tuple[int, int], before: tuple[int, int], span: float) -> tuple[float, float]:
    return max(0, now[0] - before[0]) / span, max(0, now[1] - before[1]) / span


def _acknowledged(channel: ChannelFigures) -> int:
    return sum(d.acknowledged or 0 for d in channel.durables)


__all__ = ["Live"]
