"""The asyncio front door: `await connect()` builds an asyncio context the way
`durables.connect()` builds a sync one (same settings, URL, server check, scripts)."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from .. import audit
from ..channel import channel_infos, channel_options
from ..client import HEARTBEAT_TIMEOUT_FRACTION
from ..figures import Figures, read_figures
from ..first_contact import contact_error
from ..housekeeping import housekeep
from ..io.aio import cluster
from ..io.aio.context import AsyncContext
from ..io.aio.executor import AsyncExecutor
from ..io.aio.runtime import AsyncAckFlusher, AsyncHeartbeat, AsyncHousekeeper, AsyncRuntime
from ..io.aio.transport import close as close_redis
from ..io.aio.transport import connect as open_redis
from ..io.leases import Wait
from ..ops import channels as channel_ops
from ..ops import server_info as server_ops
from ..records import AuditEntry, ChannelInfo, FullPolicy, HousekeepReport, Kind, SessionRecord
from ..retention import tidy_channel
from ..server.embedded import EmbeddedServer
from ..server_health import ServerHealth, ServerWatch, check, parse_health
from ..sessions import store as session_store
from ..sessions.core import Overflow
from ..settings import Settings, checked_settings, load_settings
from ..urls import parse_url, tls_options
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


async def _health(node: Any, op: Any, where: str) -> ServerHealth:
    info = op.parse(await node.execute_command(*op.args))
    return parse_health(info, await _save(node), where)


async def _save(node: Any) -> str | None:
    """`CONFIG GET save`, or None where the user may not ask (as the sync client's)."""
    try:
        return server_ops.save_setting(await node.execute_command("CONFIG", "GET", "save"))
    except RedisError:
        return None


class AsyncClient:
    """A connection to one server and the durables state in one namespace, for asyncio."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings = checked_settings(settings, "durables.aio.connect")
        self.url = (
            settings.url or EmbeddedServer(settings.home_dir, fsync=settings.fsync).ensure_running()
        )
        self.namespace = settings.namespace
        self.server_version = ""
        beat_timeout = max(0.05, settings.lease_timeout_s * HEARTBEAT_TIMEOUT_FRACTION)
        quick = min(beat_timeout, settings.connect_timeout_s)
        self._tls = tls = tls_options(parse_url(self.url), settings.tls_ca_file,
                                      settings.tls_cert_file, settings.tls_key_file)  # fmt: skip
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
            info, healths = await self._first_contact()
            self.server_version = server_ops.check_version(info)
            settings = self.settings
            watch = ServerWatch(settings.allow_eviction, settings.server_check_interval_s)
            for health in healths:
                check(health, settings.allow_eviction)
                watch.observe(health, quiet=True)
            self.ctx.runtime.heartbeat.watch = watch
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
        op = server_ops.info("")
        try:
            if isinstance(server, cluster.RedisCluster):
                info = op.parse(await cluster.send(server, op.args))
                healths = [await _health(node, op, f"cluster node {node.host}:{node.port}")
                           for node in server.get_primaries()]  # fmt: skip
                return info, healths
            info = op.parse(await server.execute_command(*op.args))  # type: ignore[no-untyped-call]
            return info, [parse_health(info, await _save(server))]
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
    def server_health(self) -> list[ServerHealth]:
        """How the server keeps what it confirms (eviction policy, maxmemory, persistence),
        by node, as read at connect and again every `server_check_interval_s`."""
        watch = self.ctx.runtime.heartbeat.watch
        return [] if watch is None else list(watch.healths.values())

    @property
    def server_problems(self) -> list[str]:
        """What the last readings of the server found unsafe (logged once each)."""
        watch = self.ctx.runtime.heartbeat.watch
        return [] if watch is None else watch.problems

    @property
    def state(self) -> str:
        """'connected', 'reconnecting' (an outage is being waited out) or 'closed'."""
        return self.ctx.executor.state

    def on_state(self, listener: Callable[[str, str], object]) -> None:
        self.ctx.executor.on_state(listener)

    @property
    def redis(self) -> AsyncServer:
        """The asyncio redis-py client underneath (for looking at server state by hand): a
        `redis.asyncio.Redis`, or a `redis.asyncio.cluster.RedisCluster` for a cluster URL."""
        return self.ctx.executor.redis

    @property
    def lease_ms(self) -> int:
        return self.ctx.lease_ms

    def keys(self, channel: str) -> Any:
        return self.ctx.keys(channel)

    async def channel(
        self,
        name: str,
        *,
        keyed: bool | None = None,
        ttl: float | None = None,
        capacity: int | None = None,
        full: FullPolicy | None = None,
    ) -> AsyncChannel:
        """Get or create a channel (see `Client.channel`)."""
        return await open_channel(self.ctx, name, channel_options(keyed, ttl, capacity, full))

    async def durable(
        self,
        channel: str,
        name: str,
        kind: Kind | None = None,
        start: str | None = None,
        filter: str | None = None,
        max_deliveries: int | None = None,
    ) -> AsyncDurable:
        """The durable `name` on `channel` in one await: `await client.durable("orders",
        "fulfil")` is `await (await client.channel("orders")).durable("fulfil")` (both got
        or created; the durable's arguments as for `AsyncChannel.durable`). A coroutine,
        not a handle whose first use connects: opening them is a round trip, and a lookup
        that cannot be met (`DurableExistsError`) fails here, where it was asked for."""
        found = await self.channel(channel)
        return await found.durable(name, kind, start, filter, max_deliveries)

    async def get_channel(self, name: str) -> AsyncChannel:
        return await get_channel(self.ctx, name)

    async def channel_names(self) -> list[str]:
        return await self.ctx.executor.run(channel_ops.names(self.namespace))

    async def channels(self) -> list[ChannelInfo]:
        return await self.ctx.executor.drive(channel_infos(self.ctx, await self.channel_names()))

    async def session(
        self,
        session_id: str,
        timeout: float = 60.0,
        *,
        max_depth: int | None = None,
        disconnected_max_depth: int | None = None,
        overflow: Overflow = "close",
        recovery_buffer: int | None = None,
        auto_ack: bool = True,
        replicated: int = 0,
        wait: Wait = False,
    ) -> AsyncSession:
        """Create or resume the durable client session `session_id` (see `Client.session`)."""
        session = AsyncSession(
            self.ctx, session_id, timeout, max_depth=max_depth,
            disconnected_max_depth=disconnected_max_depth, overflow=overflow,
            recovery_buffer=recovery_buffer, auto_ack=auto_ack, replicated=replicated,
        )  # fmt: skip
        await session.open(wait)
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
