"""The entry point: `connect()` and the `Client` that owns one Redis connection pool."""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING

import redis
from redis.exceptions import RedisError

from . import keys, names
from .channel import Channel, ChannelInfo, FullPolicy, channel_infos
from .errors import ChannelNotFound, ConfigError, ConnectionLostError, ServerVersionError
from .housekeeping import HousekeepReport, housekeep, trim_channel
from .leases import Heartbeat
from .replies import server_errors, text
from .scripts import Scripts
from .settings import Settings, load_settings

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .session import Session
    from .session_store import SessionRecord

MIN_REDIS = (7, 0, 0)
MIN_VALKEY = (7, 2, 0)


def connect(url: str | None = None, **settings: object) -> Client:
    """Connect to `url`, or with no URL to the embedded server (started if needed)."""
    if url is not None:
        settings["url"] = url
    return Client(load_settings(**settings))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def check_server_version(info: dict[str, object]) -> str:
    """Refuse servers too old for the stream commands durables relies on; return a label."""
    redis_version = str(info.get("redis_version", "0"))
    valkey_version = info.get("valkey_version")
    if valkey_version is not None:
        if _version(str(valkey_version)) < MIN_VALKEY:
            raise ServerVersionError(f"valkey {valkey_version} is too old: durables needs 7.2+")
        return f"valkey {valkey_version}"
    if _version(redis_version) < MIN_REDIS:
        raise ServerVersionError(f"redis {redis_version} is too old: durables needs 7.0+")
    return f"redis {redis_version}"


class Client:
    """A connection to one server and the durables state in one namespace."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.url = settings.url or self._embedded_url()
        self.namespace = settings.namespace
        self.redis = self._open(self.url)
        self.scripts = Scripts(self.redis)
        self.heartbeat = Heartbeat(self.lease_ms)
        self._housekeep_due: dict[str, float] = {}

    def _embedded_url(self) -> str:
        from .server import EmbeddedServer

        return EmbeddedServer(self.settings.home_dir, fsync=self.settings.fsync).ensure_running()

    def _open(self, url: str) -> redis.Redis:
        try:
            conn = redis.Redis.from_url(
                url,
                socket_timeout=self.settings.socket_timeout_s,
                socket_connect_timeout=self.settings.connect_timeout_s,
            )
        except ValueError as exc:
            raise ConfigError(f"malformed server URL {url!r}: {exc}") from None
        try:
            with server_errors(f"cannot reach {url}"):
                self.server_version = check_server_version(conn.info("server"))
        except BaseException:
            conn.close()
            raise
        return conn

    @property
    def lease_ms(self) -> int:
        return int(self.settings.lease_timeout_s * 1000)

    def keys(self, channel: str) -> keys.ChannelKeys:
        return keys.ChannelKeys(self.namespace, channel)

    def channel(
        self,
        name: str,
        *,
        keyed: bool | None = None,
        ttl: float | None = None,
        capacity: int | None = None,
        full: FullPolicy | None = None,
    ) -> Channel:
        """Get or create a channel; options given are stored, options left out keep their value.

        `ttl` (seconds) is the event lifespan; `capacity` the most events kept, and `full`
        what a full channel does: 'reject' (raise `ChannelFullError`, the default) or
        'drop_oldest'.
        """
        names.channel_name(name)
        options = _channel_options(keyed, ttl, capacity, full)
        k = self.keys(name)
        with server_errors(f"channel {name!r}"):
            pipe = self.redis.pipeline(transaction=False)
            pipe.hsetnx(k.meta, "created_ms", int(time.time() * 1000))
            if options:
                pipe.hset(k.meta, mapping=options)  # type: ignore[arg-type]
            pipe.sadd(keys.registry(self.namespace), name)
            pipe.execute()
        return Channel(self, name)

    def get_channel(self, name: str) -> Channel:
        """An existing channel; `ChannelNotFound` otherwise."""
        names.channel_name(name)
        with server_errors(f"channel {name!r}"):
            exists = self.redis.exists(self.keys(name).meta)
        if not exists:
            raise ChannelNotFound(f"channel {name!r} does not exist")
        return Channel(self, name)

    def channel_names(self) -> list[str]:
        with server_errors("listing channels"):
            members = self.redis.smembers(keys.registry(self.namespace))
        return sorted(text(m) for m in members)

    def channels(self) -> list[ChannelInfo]:
        """Every channel in the namespace, with its length, first and last ids and durables."""
        return channel_infos(self, self.channel_names())

    def session(self, session_id: str, timeout: float = 60.0) -> Session:
        """Create or resume the durable client session `session_id` (see `durables.session`).

        `timeout` (seconds): how long the session's queue and durable interests outlive a
        disconnect. `SessionInUseError` if the session is live in another client.
        """
        from .session import Session

        return Session(self, session_id, timeout)

    def sessions(self) -> list[SessionRecord]:
        """Every session's record (id, timeout, last seen, interests)."""
        from . import session_store

        found = (session_store.load(self, i) for i in session_store.session_ids(self))
        return [record for record in found if record is not None]

    def housekeep(self) -> HousekeepReport:
        """One round of housekeeping on every channel now: trims acknowledged and expired events."""
        return housekeep(self)

    def maybe_housekeep(self, channel: str) -> None:
        """Trim `channel` if this client has not done so for `housekeep_interval_s`."""
        now = time.monotonic()
        due = self._housekeep_due.setdefault(channel, now + self.settings.housekeep_interval_s)
        if now < due:
            return
        self._housekeep_due[channel] = now + self.settings.housekeep_interval_s
        try:
            trim_channel(self, channel)
        except (RedisError, ConnectionLostError, ChannelNotFound):
            self._housekeep_due[channel] = 0.0  # opportunistic: the next caller tries again

    def close(self) -> None:
        """Stop the heartbeat and close the connection pool."""
        self.heartbeat.close()
        self.redis.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[Channel]:
        return (Channel(self, n) for n in self.channel_names())


def _channel_options(
    keyed: bool | None, ttl: float | None, capacity: int | None, full: FullPolicy | None
) -> dict[str, int | str]:
    options: dict[str, int | str] = {}
    if keyed is not None:
        options["keyed"] = int(bool(keyed))
    if ttl is not None:
        if not isinstance(ttl, int | float) or ttl <= 0:
            raise ConfigError(f"ttl must be a positive number of seconds, got {ttl!r}")
        options["ttl_ms"] = max(1, int(ttl * 1000))
    if capacity is not None:
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise ConfigError(f"capacity must be a positive int, got {capacity!r}")
        options["capacity"] = capacity
    if full is not None:
        if full not in ("reject", "drop_oldest"):
            raise ConfigError(f"full must be 'reject' or 'drop_oldest', got {full!r}")
        options["full"] = full
    return options
