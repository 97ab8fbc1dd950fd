"""The data source's options, checked on the driver when a query starts.

Spark hands options over as strings with case-insensitive names. They are parsed
here once, without pyspark, so that a bad one fails the query at its start with a
`ConfigError` that names it, instead of failing every task later.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

from .. import ids, names
from ..client import Client, connect
from ..errors import ConfigError
from ..records import KINDS, Kind

SPARK_OWN = frozenset({"path", "checkpointlocation", "queryname"})
"""Options Spark itself may pass along to a data source; accepted and left alone."""
CONNECTION = ("url", "namespace", "channel")
READ = (
    *CONNECTION,
    "durable",
    "kind",
    "filter",
    "startingPosition",
    "maxEventsPerTrigger",
    "numPartitions",
    "startId",
    "endId",
)
WRITE = (*CONNECTION, "sinkId")
SPELLING = {name.lower(): name for name in (*READ, *WRITE)}
"""Options arrive lower-cased; messages name them as the documentation spells them."""
DEFAULT_PARTITIONS = 2
"""Read tasks per batch unless `numPartitions` says otherwise (`local[2]` has two cores)."""


@dataclass(frozen=True)
class Connection:
    """Where the events are: a server, a namespace on it and one channel."""

    url: str | None = field(repr=False)  # it may hold a password
    """A redis:// URL; None means the durables settings (`DURABLES_URL`, or the embedded
    server), resolved once on the driver so every executor uses the same server."""
    namespace: str | None
    """The durables namespace; None means the settings' default."""
    channel: str

    def connect(self) -> Client:
        """A client for this connection (the caller closes it)."""
        settings: dict[str, object] = {}
        if self.namespace is not None:
            settings["namespace"] = self.namespace
        return connect(self.url, **settings)

    def shared(self) -> Client:
        """A client for this connection kept for the life of the process (not closed by
        the caller). Spark runs task after task in the same Python workers, and opening a
        client (its connections, the server's version, the scripts) costs about what a
        task's reading of a few thousand events does."""
        with _SHARED_LOCK:
            client = _SHARED.get(self)
            if client is None or client.state == "closed":
                client = _SHARED[self] = self.connect()
            return client


_SHARED: dict[Connection, Client] = {}
_SHARED_LOCK = threading.Lock()


@atexit.register
def _close_shared() -> None:
    with _SHARED_LOCK:
        clients = list(_SHARED.values())
        _SHARED.clear()
    for client in clients:
        client.close()


@dataclass(frozen=True)
class ReadOptions:
    """What `spark.read` / `spark.readStream` of format `durables` was asked for."""

    connection: Connection
    durable: str | None
    """The durable a stream reads (required for streams; created if missing)."""
    kind: Kind | None
    """The kind a missing durable is created with (exclusive unless given); an existing
    durable of another kind is refused only when a kind is given."""
    filter: str | None
    """The filter a missing durable is created with; an existing durable's filter is used."""
    starting_position: str
    """Where a new durable starts: 'earliest', 'latest' or an event id."""
    max_events_per_trigger: int | None
    """At most this many events per micro-batch (None: everything available)."""
    num_partitions: int
    """Read tasks per batch (id ranges split by time)."""
    start_id: str | None
    """Batch reads: the first event id to read (inclusive)."""
    end_id: str | None
    """Batch reads: the last event id to read (inclusive)."""


@dataclass(frozen=True)
class WriteOptions:
    """What `df.write` / `df.writeStream` of format `durables` was asked for."""

    connection: Connection
    sink_id: str | None
    """Names the query's record of committed batches on the channel; by default the
    checkpoint location, so a restarted query finds its own record."""


def read_options(raw: Mapping[str, str]) -> ReadOptions:
    """Parse and check reader options; `ConfigError` naming the first bad one."""
    options = _lower(raw, READ)
    kind = options.get("kind")
    if kind is not None and kind not in KINDS:
        raise ConfigError(f"option kind must be one of {', '.join(KINDS)}, got {kind!r}")
    durable = options.get("durable")
    if durable is not None:
        names.durable_name(durable)
    return ReadOptions(
        connection=_connection(options),
        durable=durable,
        kind=cast(Kind | None, kind),
        filter=options.get("filter") or None,
        starting_position=_position(options.get("startingposition", "earliest")),
        max_events_per_trigger=_positive(options, "maxeventspertrigger"),
        num_partitions=_positive(options, "numpartitions") or DEFAULT_PARTITIONS,
        start_id=_event_id(options, "startid"),
        end_id=_event_id(options, "endid"),
    )


def write_options(raw: Mapping[str, str], *, streaming: bool) -> WriteOptions:
    """Parse and check writer options; a stream needs an identity for its commit record."""
    options = _lower(raw, WRITE)
    sink_id = options.get("sinkid") or options.get("checkpointlocation")
    if streaming and not sink_id:
        raise ConfigError(
            "writeStream to durables needs option checkpointLocation (or sinkId): it names "
            "the query's record of committed batches, which keeps each batch to one copy"
        )
    return WriteOptions(connection=_connection(options), sink_id=sink_id)


def _lower(raw: Mapping[str, str], known: tuple[str, ...]) -> dict[str, str]:
    options = {str(name).lower(): str(value) for name, value in raw.items()}
    unknown = sorted(set(options) - {k.lower() for k in known} - SPARK_OWN)
    if unknown:
        raise ConfigError(
            f"unknown option {unknown[0]!r} for format durables; known: {', '.join(known)}"
        )
    return options


def _connection(options: Mapping[str, str]) -> Connection:
    channel = options.get("channel")
    if not channel:
        raise ConfigError('format durables needs option channel, e.g. .option("channel", "orders")')
    names.channel_name(channel)
    return Connection(options.get("url") or None, options.get("namespace") or None, channel)


def _position(value: str) -> str:
    if value in ("earliest", "latest"):
        return value
    try:
        return ids.normal(value)
    except ValueError:
        raise ConfigError(
            f"option startingPosition must be 'earliest', 'latest' or an event id, got {value!r}"
        ) from None


def _positive(options: Mapping[str, str], name: str) -> int | None:
    value = options.get(name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(f"option {SPELLING[name]} must be a positive whole number, got {value!r}")
    return number


def _event_id(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name)
    if value is None:
        return None
    try:
        return ids.normal(value)
    except ValueError:
        raise ConfigError(
            f"option {SPELLING[name]} must be an event id ('<ms>-<seq>'), got {value!r}"
        ) from None
