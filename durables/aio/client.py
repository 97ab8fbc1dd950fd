"""The asyncio front door: `await connect()` builds an asyncio context the way
`durables.connect()` builds a sync one (same settings, URL, server check, scripts)."""

from __future__ import annotations

import functools
from collections.abc import Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from .. import audit
from ..channel import channel_infos
from ..client import ClientCore, DurableAsk
from ..figures import Figures, read_figures
from ..first_contact import contact_error
from ..housekeeping import housekeep
from ..io.aio import cluster
from ..io.aio.context import AsyncContext
from ..io.aio.executor import AsyncExecutor
from ..io.aio.runtime import AsyncAckFlusher, AsyncHeartbeat, AsyncHousekeeper, AsyncRuntime
from ..io.aio.transport import close as close_redis
from ..io.aio.transport import connect as open_redis
from ..ops import channels as channel_ops
from ..ops import server_info as server_ops
from ..ops.flows import walk_awaited
from ..ops.server_info import Ask, Primaries
from ..options import SessionOptions
from ..records import AuditEntry, ChannelInfo, HousekeepReport, SessionRecord
from ..retention import tidy_channel
from ..server_health import ServerHealth
from ..sessions import store as session_store
from ..settings import Settings, load_settings
from ..urls import parse_url
from .channel import AsyncChannel, get_channel, open_channel
from .durable import AsyncDurable
from .session import AsyncSession

if TYPE_CHECKING:
    from ..io.aio.cluster import AsyncServer


async def connect(url: str | None = None, **settings: object) -> AsyncClient:
    """Connect to `url`, or with no URL to the embedded server (started if needed)."""
    if url is not None:
        settings["url"] = url
    client = AsyncClient(load_settings(**settings))
    await client.start()
    return client


async def _ask(server: AsyncServer, step: Ask | Primaries) -> Any:
    """A step of the first contact (`ops.server_info.first_contact`), sent (awaited)."""
    if isinstance(step, Primaries):
        primaries = server.get_primaries()  # type: ignore[union-attr]
        return [(node, f"cluster node {node.host}:{node.port}") for node in primaries]
    try:
        if step.node is not None:
            return await step.node.execute_command(*step.args)
        if isinstance(server, cluster.RedisCluster):
            return await cluster.send(server, step.args)
        return await server.execute_command(*step.args)  # type: ignore[no-untyped-call]
    except RedisError:
        if step.optional:
            return None
        raise


class AsyncClient(
    ClientCore[
        Coroutine[Any, Any, AsyncChannel],
        Coroutine[Any, Any, AsyncDurable],
        Coroutine[Any, Any, AsyncSession],
    ]
):
    """A connection to one server and the durables state in one namespace, for asyncio.
    `channel()`, `durable()` and `session()` as the sync client's
    (`durables.client.ClientCore`), awaited."""

    ctx: AsyncContext

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, "durables.aio.connect")
        settings, tls = self.settings, self._tls
        beat_timeout, quick = self._beat_timeout, self._quick
        executor = AsyncExecutor(
            open_redis(self.url, settings.socket_timeout_s, settings.connect_timeout_s, tls),
            reconnect_timeout_s=settings.reconnect_timeout_s,
            probe=open_redis(self.url, beat_timeout, quick, tls),
        )
        heartbeat = AsyncHeartbeat(
            AsyncExecutor(open_redis(self.url, beat_timeout, quick, tls), reports=False),
            int(settings.lease_timeout_s * 1000),
            on_failure=self._heartbeat_failed,
        )
        housekeeper = AsyncHousekeeper(self._trim, settings.housekeep_interval_s)
        acks = AsyncAckFlusher(settings.ack_flush_interval_s)
        runtime = AsyncRuntime(heartbeat, housekeeper, acks)
        self.ctx = AsyncContext(executor, settings, runtime)

    async def start(self) -> None:
        """Check the server and load the scripts (done by `connect()`)."""
        try:
            self.ctx.runtime.heartbeat.watch = self._met(*await self._first_contact())
            await self.ctx.executor.load_scripts()
        except BaseException:
            await self.ctx.runtime.heartbeat.close()
            await self.ctx.executor.close()
            raise
        self.ctx.runtime.heartbeat.start()

    async def _first_contact(self) -> tuple[dict[str, object], list[ServerHealth]]:
        """The server's INFO and each primary's health, asked as
        `durables.client.first_contact` asks them."""
        timeout_s = self.settings.connect_timeout_s
        server = open_redis(self.url, timeout_s, timeout_s, self._tls)
        try:
            plan = server_ops.first_contact(isinstance(server, cluster.RedisCluster))
            return await walk_awaited(plan, functools.partial(_ask, server))
        except RedisError as exc:
            raise contact_error(exc, parse_url(self.url), timeout_s) from exc
        finally:
            await close_redis(server)

    async def _heartbeat_failed(self) -> None:
        if self.ctx.executor.state == "connected":
            await self.ctx.executor.interrupt()

    async def _trim(self, channel: str) -> int:
        return await self.ctx.executor.drive(tidy_channel(self.ctx, self.ctx.keys(channel)))

    @property
    def redis(self) -> AsyncServer:
        """The asyncio redis-py client underneath (for looking at server state by hand): a
        `redis.asyncio.Redis`, or a `redis.asyncio.cluster.RedisCluster` for a cluster URL."""
        return self.ctx.executor.redis

    async def _channel(self, name: str, options: dict[str, int | str]) -> AsyncChannel:
        return await open_channel(self.ctx, name, options)

    async def _durable(self, channel: str, ask: DurableAsk) -> AsyncDurable:
        return await (await self.channel(channel)).durable(*ask)

    async def get_channel(self, name: str) -> AsyncChannel:
        return await get_channel(self.ctx, name)

    async def channel_names(self) -> list[str]:
        return await self.ctx.executor.run(channel_ops.names(self.namespace))

    async def channels(self) -> list[ChannelInfo]:
        return await self.ctx.executor.drive(channel_infos(self.ctx, await self.channel_names()))

    async def _session(self, session_id: str, options: SessionOptions) -> AsyncSession:
        session = AsyncSession(self.ctx, session_id, options)
        await session.open(options.wait)
        return session

    async def sessions(self) -> list[SessionRecord]:
        return await self.ctx.executor.drive(session_store.records(self.ctx))

    async def session_live(self, session_id: str) -> bool:
        return await self.ctx.executor.drive(session_store.is_live(self.ctx, session_id))

    async def discard_session(self, session_id: str, by: str = "an operator") -> bool:
        """Close a session from outside: its queue and interests go, with an alert naming
        `by`. False if there is no such session."""
        return await self.ctx.executor.drive(session_store.discard(self.ctx, session_id, by))

    async def alerts(self, count: int = 100) -> list[dict[str, Any]]:
        return await self.ctx.executor.drive(session_store.alerts(self.ctx, count))

    async def record_audit(self, action: str, target: str, address: str, outcome: str = "") -> str:
        """Note an admin action in the namespace's audit log (kept on the server)."""
        return await self.ctx.executor.drive(
            audit.record(self.ctx, action, target, address, outcome)
        )

    async def audit(self, count: int = 100) -> list[AuditEntry]:
        """The newest entries of the audit log of admin actions, newest first."""
        return await self.ctx.executor.drive(audit.entries(self.ctx, count))

    async def server_ms(self) -> int:
        return await self.ctx.executor.drive(session_store.server_ms(self.ctx))

    async def figures(self, alert_count: int = 20, channel: str | None = None) -> Figures:
        """Everything an operator looks at, read now (see `durables.figures`); with
        `channel`, that channel's figures alone."""
        return await self.ctx.executor.drive(read_figures(self.ctx, alert_count, channel))

    async def housekeep(self) -> HousekeepReport:
        """One round of housekeeping on every channel now."""
        return await self.ctx.executor.drive(housekeep(self.ctx))

    async def close(self) -> None:
        """Stop every task this client started (subscriptions and session deliveries first,
        then housekeeping and the heartbeat), then close the connection pools."""
        await self.ctx.runtime.close()
        await self.ctx.executor.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


__all__ = ["AsyncClient", "connect"]
