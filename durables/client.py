"""The entry point: `connect()` and the `Client`, a thin front over one context.

The client picks a transport from the URL, opens an executor (and one apart for the
heartbeat), starts the runtime that owns its threads, and hands a `Context` to
everything it makes. It holds no logic of its own beyond that.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar

from redis.exceptions import RedisError

from . import audit
from .channel import Channel, channel_infos, channel_options, get_channel, open_channel
from .durable import Durable
from .figures import Figures, read_figures
from .first_contact import contact_error
from .housekeeping import housekeep
from .io import cluster
from .io.cluster import Server
from .io.context import Context
from .io.executor import Executor
from .io.leases import Heartbeat
from .io.runtime import AckFlusher, Housekeeper, Runtime
from .io.transport import Transport, transport_for
from .ops import channels as channel_ops
from .ops import server_info as server_ops
from .ops.flows import walk
from .ops.server_info import Ask, Primaries
from .options import Overflow, SessionOptions, Wait
from .records import AuditEntry, ChannelInfo, FullPolicy, HousekeepReport, Kind, SessionRecord
from .retention import tidy_channel
from .server.embedded import EmbeddedServer
from .server_health import ServerHealth, ServerWatch, check
from .session import Session
from .sessions import store as session_store
from .settings import Settings, checked_settings, load_settings
from .urls import parse_url, tls_options

if TYPE_CHECKING:
    from .io.aio.context import AsyncContext

HEARTBEAT_TIMEOUT_FRACTION = 0.25
"""The heartbeat's socket timeout as a part of the lease: a hung renewal gives up in time
for the next beat (a third of the lease) to try again."""


def first_contact(
    transport: Transport, connect_timeout_s: float
) -> tuple[dict[str, object], list[ServerHealth]]:
    """The server's INFO, and how each primary keeps what it confirms
    (`ops.server_info.first_contact`), asked on a connection whose every timeout (a TLS
    handshake's too) is `connect_timeout_s`; what fails is said plainly
    (`first_contact.contact_error`)."""
    server = transport.connect(connect_timeout_s, connect_timeout_s)
    try:
        plan = server_ops.first_contact(isinstance(server, cluster.RedisCluster))
        return walk(plan, functools.partial(_ask, server))
    except RedisError as exc:
        raise contact_error(exc, transport.url, connect_timeout_s) from exc
    finally:
        server.close()


def _ask(server: Server, step: Ask | Primaries) -> Any:
    """A step of the first contact, sent (blocking)."""
    if isinstance(step, Primaries):
        return [(node, node_name(node)) for node in cluster.primaries(server)]  # type: ignore[arg-type]
    try:
        if step.node is not None:
            return step.node.execute_command(*step.args)
        if isinstance(server, cluster.RedisCluster):
            return cluster.send(server, step.args)
        return server.execute_command(*step.args)  # type: ignore[no-untyped-call]
    except RedisError:
        if step.optional:
            return None
        raise


def node_name(node: Any) -> str:
    kwargs = node.connection_pool.connection_kwargs
    return f"cluster node {kwargs.get('host')}:{kwargs.get('port')}"


ChannelT = TypeVar("ChannelT")
DurableT = TypeVar("DurableT")
SessionT = TypeVar("SessionT")
DurableAsk: TypeAlias = tuple[str, Kind | None, str | None, str | None, int | None]
"""A durable's name, kind, start, filter and max_deliveries, as `Channel.durable` takes them."""


class ClientCore(ABC, Generic[ChannelT, DurableT, SessionT]):
    """What both clients are alike: their settings and server, what they report of it,
    and the arguments of `channel()`, `durable()` and `session()`, checked once; each client
    opens what they ask for its own way (blocking, or awaited)."""

    ctx: Context | AsyncContext

    def __init__(self, settings: Settings, where: str) -> None:
        self.settings = settings = checked_settings(settings, where)
        self.url = (
            settings.url or EmbeddedServer(settings.home_dir, fsync=settings.fsync).ensure_running()
        )
        self.namespace = settings.namespace
        self.server_version = ""
        self._tls = tls_options(
            parse_url(self.url), settings.tls_ca_file, settings.tls_cert_file, settings.tls_key_file
        )
        self._beat_timeout = max(0.05, settings.lease_timeout_s * HEARTBEAT_TIMEOUT_FRACTION)
        """The heartbeat's socket timeout; `_quick` its connect timeout, and the probe's."""
        self._quick = min(self._beat_timeout, settings.connect_timeout_s)

    def _met(self, info: dict[str, object], healths: list[ServerHealth]) -> ServerWatch:
        """The server as first met: its version checked (and kept), and how each primary
        keeps what it confirms judged (`UnsafeServerError`), the start of the watch the
        heartbeat keeps on it."""
        self.server_version = server_ops.check_version(info)
        settings = self.settings
        watch = ServerWatch(settings.allow_eviction, settings.server_check_interval_s)
        for health in healths:
            check(health, settings.allow_eviction)
            watch.observe(health, quiet=True)
        return watch

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
        """Call `listener(old, new)` at every change of `state`."""
        self.ctx.executor.on_state(listener)

    @property
    def lease_ms(self) -> int:
        return self.ctx.lease_ms

    def keys(self, channel: str) -> Any:
        return self.ctx.keys(channel)

    def channel(
        self,
        name: str,
        *,
        keyed: bool | None = None,
        ttl: float | None = None,
        capacity: int | None = None,
        full: FullPolicy | None = None,
    ) -> ChannelT:
        """Get or create a channel; options given are stored, options left out keep their value.

        `ttl` (seconds) is the event lifespan; `capacity` the most events kept, and `full`
        what a full channel does: 'reject' (raise `ChannelFullError`, the default) or
        'drop_oldest'.
        """
        return self._channel(name, channel_options(keyed, ttl, capacity, full))

    def durable(
        self,
        channel: str,
        name: str,
        kind: Kind | None = None,
        start: str | None = None,
        filter: str | None = None,
        max_deliveries: int | None = None,
    ) -> DurableT:
        """The durable `name` on `channel`: `client.channel(channel).durable(name, ...)` (both
        got or created; the durable's arguments as for `Channel.durable`). In the asyncio
        client one await, and a coroutine, not a handle whose first use connects: opening
        them is a round trip, and a lookup that cannot be met (`DurableExistsError`) fails
        there, where it was asked for."""
        return self._durable(channel, (name, kind, start, filter, max_deliveries))

    def session(
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
        options: SessionOptions | None = None,
    ) -> SessionT:
        """Create or resume the durable client session `session_id` (see `durables.session`).

        The keywords are `SessionOptions`' fields; `options=` takes them as one object
        (keywords given beside it replace its fields). `timeout` (seconds): how long the
        session's queue and durable interests outlive a disconnect. `recovery_buffer`: how
        many events may be in flight (sent, not yet acknowledged); after a broken connection
        they are sent again. `SessionInUseError` if the session is live in another client;
        `wait` for that client's live lease to lapse (it stops being renewed when the client
        dies): False (the default) not at all, a number of seconds at most that long, True
        as long as it takes.
        """
        return self._session(
            session_id,
            SessionOptions.of(
                options,
                timeout=timeout,
                max_depth=max_depth,
                disconnected_max_depth=disconnected_max_depth,
                overflow=overflow,
                recovery_buffer=recovery_buffer,
                auto_ack=auto_ack,
                replicated=replicated,
                wait=wait,
            ),
        )

    @abstractmethod
    def _channel(self, name: str, options: dict[str, int | str]) -> ChannelT:
        """The channel got or created, with the options given stored."""

    @abstractmethod
    def _durable(self, channel: str, ask: DurableAsk) -> DurableT:
        """The durable asked for, on the channel got or created."""

    @abstractmethod
    def _session(self, session_id: str, options: SessionOptions) -> SessionT:
        """The session created or resumed."""


def connect(url: str | None = None, **settings: object) -> Client:
    """Connect to `url`, or with no URL to the embedded server (started if needed)."""
    if url is not None:
        settings["url"] = url
    return Client(load_settings(**settings))


class Client(ClientCore[Channel, Durable, Session]):
    """A connection to one server and the durables state in one namespace."""

    ctx: Context

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, "durables.connect")
        settings = self.settings
        self.transport = transport_for(self.url, self._tls)
        watch = self._met(*first_contact(self.transport, settings.connect_timeout_s))
        beat_timeout, quick = self._beat_timeout, self._quick
        executor = Executor(
            self.transport.connect(settings.socket_timeout_s, settings.connect_timeout_s),
            reconnect_timeout_s=settings.reconnect_timeout_s,
            probe=self.transport.connect(beat_timeout, quick),
        )
        try:
            executor.load_scripts()
        except BaseException:
            executor.close()
            raise
        heartbeat = Heartbeat(
            Executor(self.transport.connect(beat_timeout, quick), reports=False),
            int(settings.lease_timeout_s * 1000),
            on_failure=self._heartbeat_failed,
            watch=watch,
        )
        housekeeper = Housekeeper(self._trim, settings.housekeep_interval_s)
        acks = AckFlusher(settings.ack_flush_interval_s)
        self.ctx = Context(executor, settings, Runtime(heartbeat, housekeeper, acks))
        heartbeat.start()

    def _heartbeat_failed(self) -> None:
        """The server stopped answering the heartbeat: break the application's connections
        (a black-holed socket would hold a call for the whole socket timeout)."""
        if self.ctx.executor.state == "connected":
            self.ctx.executor.interrupt()

    def _trim(self, channel: str) -> int:
        return self.ctx.executor.drive(tidy_channel(self.ctx, self.ctx.keys(channel)))

    @property
    def redis(self) -> Server:
        """The redis-py client underneath (for looking at server state by hand): a
        `redis.Redis`, or a `redis.cluster.RedisCluster` for a `redis+cluster://` URL."""
        return self.ctx.executor.redis

    def _channel(self, name: str, options: dict[str, int | str]) -> Channel:
        return open_channel(self.ctx, name, options)

    def _durable(self, channel: str, ask: DurableAsk) -> Durable:
        return self.channel(channel).durable(*ask)

    def get_channel(self, name: str) -> Channel:
        """An existing channel; `ChannelNotFoundError` otherwise."""
        return get_channel(self.ctx, name)

    def channel_names(self) -> list[str]:
        return self.ctx.executor.run(channel_ops.names(self.namespace))

    def channels(self) -> list[ChannelInfo]:
        """Every channel in the namespace, with its length, first and last ids and durables."""
        return self.ctx.executor.drive(channel_infos(self.ctx, self.channel_names()))

    def _session(self, session_id: str, options: SessionOptions) -> Session:
        return Session(self.ctx, session_id, options)

    def sessions(self) -> list[SessionRecord]:
        """Every session's record (id, timeout, last seen, interests)."""
        return self.ctx.executor.drive(session_store.records(self.ctx))

    def session_live(self, session_id: str) -> bool:
        """Whether some client holds the session live now."""
        return self.ctx.executor.drive(session_store.is_live(self.ctx, session_id))

    def alerts(self, count: int = 100) -> list[dict[str, Any]]:
        """Recent alerts (expired sessions, ...), newest first."""
        return self.ctx.executor.drive(session_store.alerts(self.ctx, count))

    def record_audit(self, action: str, target: str, address: str, outcome: str = "") -> str:
        """Note an admin action in the namespace's audit log (kept on the server)."""
        return self.ctx.executor.drive(audit.record(self.ctx, action, target, address, outcome))

    def audit(self, count: int = 100) -> list[AuditEntry]:
        """The newest entries of the audit log of admin actions, newest first."""
        return self.ctx.executor.drive(audit.entries(self.ctx, count))

    def server_ms(self) -> int:
        """The server's clock, in milliseconds."""
        return self.ctx.executor.drive(session_store.server_ms(self.ctx))

    def figures(self, alert_count: int = 20, channel: str | None = None) -> Figures:
        """Everything an operator looks at, read now (see `durables.figures`); with
        `channel`, that channel's figures alone."""
        return self.ctx.executor.drive(read_figures(self.ctx, alert_count, channel))

    def discard_session(self, session_id: str, by: str = "an operator") -> bool:
        """Close a session from outside: its queue and interests go, with an alert naming
        `by`. False if there is no such session."""
        return self.ctx.executor.drive(session_store.discard(self.ctx, session_id, by))

    def housekeep(self) -> HousekeepReport:
        """One round of housekeeping on every channel now: trims acknowledged and expired events."""
        return self.ctx.executor.drive(housekeep(self.ctx))

    def close(self) -> None:
        """Stop every thread this client started (subscriptions and session deliveries first,
        then housekeeping and the heartbeat), then close the connection pool."""
        self.ctx.runtime.close()
        self.ctx.executor.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[Channel]:
        return (Channel(self.ctx, n) for n in self.channel_names())
