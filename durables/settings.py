"""One settings model for the whole library, validated at the edge.

Values come, highest first, from keyword arguments, `DURABLES_*` environment
variables, and a `durables.toml` in the working directory.
"""

from __future__ import annotations

import difflib
import logging
import os
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, FilePath, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from .errors import ConfigError
from .urls import parse_url, shown

Fsync = Literal["everysec", "always"]
TOML_FILE = "durables.toml"
log = logging.getLogger(__name__)


class Settings(BaseSettings):
    """Everything a client needs to know; one instance per `Client`."""

    model_config = SettingsConfigDict(
        env_prefix="DURABLES_",
        toml_file=TOML_FILE,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
    )

    url: str | None = None
    """`redis://`, `rediss://`, `redis+sentinel://h:p[,h:p]/primary` or `redis+cluster://`
    URL; None starts or reuses the embedded server."""
    tls_ca_file: FilePath | None = None
    """With `rediss://`: the CA certificates (PEM) the server's certificate must chain to;
    None: the system's. The server's certificate is always verified."""
    tls_cert_file: FilePath | None = None
    """With `rediss://`: this client's certificate (PEM), for servers that ask for one."""
    tls_key_file: FilePath | None = None
    """With `rediss://`: the private key of `tls_cert_file` (PEM)."""
    namespace: str = Field(default="durables", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    """Prefix of every key, so several applications can share one server."""
    home: Path = Path("~/.local/share/durables")
    """Where the embedded server keeps its data, config and log."""
    fsync: Fsync = "everysec"
    """AOF fsync policy of the embedded server; 'always' loses nothing acknowledged."""
    max_payload_bytes: int = Field(default=1 << 20, gt=0)
    """Largest event `publish` accepts, in bytes: its payload, key and properties together."""
    lease_timeout_s: float = Field(default=15.0, gt=0.05, le=3600)
    """A consumer that stops heart-beating for this long loses its lease; at least `block_s`
    (a consumer blocked in a read receives events until the read ends)."""
    read_batch: int = Field(default=100, ge=1, le=10_000)
    """Events a consumer reads from the server in one round trip."""
    block_s: float = Field(default=1.0, gt=0, le=60)
    """Longest single blocking wait for new events (bounds how fast close() returns)."""
    client_queue_window: int = Field(default=100, ge=1, le=100_000)
    """Default window of a shared or serial consumer when none is given."""
    ack_flush_interval_s: float = Field(default=0.0, ge=0, le=60)
    """Acknowledgements wait this long on the client to go out in one batch (with the next
    read, or on their own when it is due); 0 sends each at once. A crash loses at most this
    much of acknowledging: those events are delivered again, flagged."""
    housekeep_interval_s: float = Field(default=5.0, ge=0)
    """How often a busy client trims a channel it uses as a side effect."""
    socket_timeout_s: float = Field(default=30.0, gt=0)
    """Socket timeout of a Redis connection; must exceed `block_s`."""
    connect_timeout_s: float = Field(default=5.0, gt=0)
    """How long to wait for a TCP connection to the server."""
    replicas: int = Field(default=0, ge=0, le=16)
    """Replicas that must confirm each publish (`WAIT`) before it returns; 0: do not wait."""
    replica_timeout_s: float = Field(default=1.0, gt=0, le=60)
    """How long a publish waits for `replicas` confirmations before `ReplicationError`."""
    idempotent_publish: bool = True
    """Every publish carries this client's producer id and a sequence, so a retry after a
    lost reply is stored once (and each event its message id). False: a plain append, as
    before idempotence (the benchmark's comparison); a retry may then store it twice."""
    dedupe_window_s: float = Field(default=300.0, ge=0, le=86_400)
    """A publish with a `message_id` seen on the channel this recently stores nothing and
    returns the first event's id (a producer may retry after a failover safely)."""
    orphan_ttl_s: float = Field(default=60.0, ge=0, le=86_400)
    """Events pending for a consumer a shared or serial durable does not know (an XACK lost
    in a failover, a reader outside durables) that long are handed back to be dealt again
    by housekeeping, flagged as redelivered: nobody else could ever acknowledge them."""
    allow_eviction: bool = False
    """Connect to a server whose `maxmemory-policy` may evict durables' keys once it reaches
    its `maxmemory` (anything but `noeviction`), accepting that confirmed events, durables
    and sessions can then vanish: refused unless this is True (then a warning at connect)."""
    server_check_interval_s: float = Field(default=30.0, gt=0, le=86_400)
    """How often a running client reads the server's settings again (eviction policy,
    maxmemory, persistence), so a change made at runtime is logged once and shown."""
    reconnect_timeout_s: float = Field(default=60.0, ge=0)
    """After a dropped connection or a server restart, keep retrying (backoff with jitter)
    this long before giving up (consumers, subscriptions and sessions then end with
    `ConnectionLostError`); 0 gives up at once."""

    @field_validator("url")
    @classmethod
    def _url_parses(cls, url: str | None) -> str | None:
        if url is None:
            return None
        try:
            parse_url(url)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return url

    @model_validator(mode="after")
    def _socket_outlasts_a_blocked_read(self) -> Settings:
        if self.socket_timeout_s <= self.block_s:
            raise ValueError(
                f"socket_timeout_s ({self.socket_timeout_s:g}) must exceed block_s "
                f"({self.block_s:g}): every idle blocking read would time out and reconnect"
            )
        return self

    @model_validator(mode="after")
    def _lease_outlasts_a_blocked_read(self) -> Settings:
        # A consumer blocked in a read is handed new events until the read ends: a serial
        # consumer through its tap, an exclusive holder through its gate. Detaching a
        # consumer whose lease lapsed closes its tap and taking over an exclusive durable
        # deletes the holder's gate, which ends such a read; a block no longer than the
        # lease keeps that the rare case (a paused process). Equal is the boundary, and
        # allowed: a lease of 1 s with the default block of 1 s is common in tests and demos.
        if self.lease_timeout_s < self.block_s:
            raise ValueError(
                f"lease_timeout_s ({self.lease_timeout_s:g}) must be at least block_s "
                f"({self.block_s:g}): a consumer blocked in a read keeps receiving events "
                "until the read ends, which is safe only while it holds its lease"
            )
        return self

    @model_validator(mode="after")
    def _memory_has_no_replicas(self) -> Settings:
        if self.replicas and self.url is not None and self.url.startswith("memory:"):
            raise ValueError(
                f"replicas={self.replicas} with memory://: an in-process store has no replicas "
                "to confirm a publish (use a server with replicas, redis://)"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """The fields pydantic's repr shows, the URL without its password."""
        for name, value in super().__repr_args__():
            yield name, shown(value) if name == "url" and value is not None else value

    @property
    def home_dir(self) -> Path:
        """`home` with `~` expanded."""
        return self.home.expanduser()


def _message(err: Any) -> str:
    """A validation error's message as our validators wrote it: pydantic puts "Value
    error, " before the message of a `ValueError` raised in a validator."""
    if err["type"] == "value_error" and "error" in err.get("ctx", {}):
        return str(err["ctx"]["error"])
    return str(err["msg"])


def load_settings(**overrides: object) -> Settings:
    """Build `Settings`, turning pydantic's validation errors and a malformed `durables.toml`
    into `ConfigError`; a misspelled `DURABLES_*` variable gets a warning (once)."""
    warn_misspelled(os.environ)
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{TOML_FILE} is not valid TOML: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {_message(err)}"
            for err in exc.errors()
        )
        raise ConfigError(f"invalid durables settings: {problems}") from None


ENV_PREFIX = "DURABLES_"
NOT_SETTINGS = ("DURABLES_TEST_",)
"""Prefixes of variables that are not settings (the test suite's own)."""
_warned: set[str] = set()


def misspelled(environ: Mapping[str, str]) -> dict[str, str]:
    """`DURABLES_*` variables that are no setting but close to one: {variable: setting's}."""
    known = [ENV_PREFIX + name.upper() for name in Settings.model_fields]
    found = {}
    for variable in environ:
        name = variable.upper()
        if not name.startswith(ENV_PREFIX) or name in known or name.startswith(NOT_SETTINGS):
            continue
        closest = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        if closest:
            found[variable] = closest[0]
    return found


def warn_misspelled(environ: Mapping[str, str]) -> None:
    """Log, once per variable, each `misspelled` one: pydantic ignores unknown variables,
    so `DURABLES_LEASE_TIMEOUT=5` would otherwise change nothing without a word."""
    for variable, closest in misspelled(environ).items():
        if variable not in _warned:
            _warned.add(variable)
            log.warning(
                "%s is not a durables setting and is ignored: did you mean %s?", variable, closest
            )


def checked_settings(settings: object, connect: str) -> Settings:
    """A client's `settings`, refused with a pointer to `connect` when they are not
    `Settings` (a URL passed straight to the class would otherwise fail deep inside)."""
    if not isinstance(settings, Settings):
        raise ConfigError(  # not the value itself: a URL may carry a password
            f"a client takes Settings, not {type(settings).__name__}: "
            f"use {connect}(url, **settings), or load_settings(url=...)"
        )
    return settings


__all__ = ["Fsync", "Settings", "checked_settings", "load_settings", "misspelled"]
