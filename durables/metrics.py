"""Prometheus metrics of one namespace, read from the server at scrape time.

`collector(client)` is a `prometheus_client` collector: register it in an application's
own registry (or use `registry(client)`), and every scrape reads the namespace afresh.
`exposition(client)` is the text format, as `durables metrics` prints it. Nothing here
changes server state: a scrape only reads.

Every number comes from `client.figures()` (`durables.figures`), the one read the CLI and
the web console show too, so the three never disagree. Counters (`_total`) are the
server's own: a stream's entries-added (published), a group's entries-read (delivered),
the dead-letter stream's entries-added (dead-lettered), and what the scripts count in the
channel's meta hash (dropped, duplicates); so they hold across processes and restarts.
Sessions are aggregated by default (a per-device session id would make one series each);
`per_session=True` adds a series per session.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from .errors import DurablesError
from .figures import ChannelFigures, DurableFigures, Figures
from .server_health import parse_health

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger(__name__)

PREFIX = "durables"
DURABLE = ["channel", "durable"]


def snapshot(client: Client) -> Figures:
    """Read the namespace now (no alerts: the metrics do not export them)."""
    return client.figures(alert_count=0)


# -- presenting -----------------------------------------------------------------------------

DURABLE_GAUGES: dict[str, tuple[str, Callable[[DurableFigures], float]]] = {
    "durable_depth": ("Events waiting to be delivered to the durable.", lambda d: d.info.depth),
    "durable_transaction_depth": (
        "Events delivered to the durable's consumers and not yet acknowledged.",
        lambda d: d.info.transaction_depth,
    ),
    "durable_consumers": ("Consumers attached to the durable.", lambda d: len(d.info.consumers)),
    "durable_lag": (
        "Events after the durable's position that it has not read yet (filter not applied).",
        lambda d: d.lag or 0,
    ),
    "durable_redeliveries": (
        "Pending events of the durable that were delivered before (a gauge: redelivery "
        "count above zero).",
        lambda d: d.redelivered_pending,
    ),
    "durable_dead_letters": (
        "Events in the durable's dead letters now (given up on after max_deliveries).",
        lambda d: d.dead_letters,
    ),
    "durable_oldest_unacked_age_seconds": (
        "Age of the oldest event the durable has not acknowledged, handed out or not, from "
        "its publish time; 0 when it has acknowledged everything.",
        lambda d: d.oldest_unacked_age_s,
    ),
}
DURABLE_COUNTERS: dict[str, tuple[str, Callable[[DurableFigures], int | None]]] = {
    "durable_delivered": (
        "Events the durable ever read from the channel (its group's entries-read).",
        lambda d: d.delivered,
    ),
    "durable_acknowledged": (
        "Events the durable read and no longer holds (acknowledged, or removed by a purge).",
        lambda d: d.acknowledged,
    ),
    "durable_dead_lettered": (
        "Events ever moved to the durable's dead letters.",
        lambda d: d.dead_lettered,
    ),
    "durable_redelivered": (
        "Events the durable handed out again (rolled back, back from a consumer that left "
        "or lapsed, or inherited by a new exclusive holder).",
        lambda d: d.redelivered,
    ),
}
DROP_REASONS = ("capacity", "ttl", "purge")


def families(
    figures: Figures | None, per_session: bool = False
) -> list[GaugeMetricFamily | CounterMetricFamily]:
    """The metric families of one read; None (the server could not be read): `up` 0."""
    up = GaugeMetricFamily(f"{PREFIX}_up", "1 if the durables server could be read, else 0.")
    up.add_metric([], 0 if figures is None else 1)
    if figures is None:
        return [up]
    return [
        up,
        *_channels(figures),
        *_durables(figures),
        *_sessions(figures, per_session),
        *_server(figures),
    ]


def _channels(figures: Figures) -> list[GaugeMetricFamily | CounterMetricFamily]:
    length = _gauge("channel_length", "Events in the channel.", ["channel"])
    retained = _gauge(
        "channel_retained_bytes",
        "What the channel's stream takes in the server's memory.",
        ["channel"],
    )
    oldest = _gauge(
        "channel_oldest_event_age_seconds",
        "Age of the channel's oldest retained event; 0 when it holds none.",
        ["channel"],
    )
    published = _counter(
        "channel_published",
        "Events ever published to the channel (its stream's entries-added).",
        ["channel"],
    )
    dropped = _counter(
        "channel_dropped",
        "Events removed before every durable acknowledged them, by reason (capacity, ttl, purge).",
        ["channel", "reason"],
    )
    duplicates = _counter(
        "channel_duplicates_discarded",
        "Publishes not stored again: their message id was seen within the dedupe window.",
        ["channel"],
    )
    for c in figures.channels:
        name = c.info.name
        length.add_metric([name], c.info.length)
        if c.retained_bytes is not None:
            retained.add_metric([name], c.retained_bytes)
        oldest.add_metric([name], _channel_age_s(c, figures.server_ms))
        published.add_metric([name], c.added)
        for reason in DROP_REASONS:
            dropped.add_metric([name, reason], c.counters.get(f"dropped:{reason}", 0))
        duplicates.add_metric([name], c.counters.get("duplicates", 0))
    return [length, retained, oldest, published, dropped, duplicates]


def _channel_age_s(c: ChannelFigures, now_ms: int) -> float:
    return 0.0 if c.first_ms is None else max(0, now_ms - c.first_ms) / 1000


def _durables(figures: Figures) -> list[GaugeMetricFamily | CounterMetricFamily]:
    gauges = {n: _gauge(n, h, DURABLE) for n, (h, _) in DURABLE_GAUGES.items()}
    counters = {n: _counter(n, h, DURABLE) for n, (h, _) in DURABLE_COUNTERS.items()}
    for c in figures.channels:
        for d in c.durables:
            labels = [c.info.name, d.info.name]
            for n, (_, value) in DURABLE_GAUGES.items():
                if n != "durable_lag" or d.lag is not None:  # the server may not know it
                    gauges[n].add_metric(labels, value(d))
            for n, (_, count) in DURABLE_COUNTERS.items():
                found = count(d)
                if found is not None:
                    counters[n].add_metric(labels, found)
    return [*gauges.values(), *counters.values(), *_keys(figures)]


def _keys(figures: Figures) -> list[GaugeMetricFamily]:
    """Keyed durables: keys out per consumer (by the name its application gave it, which
    stays bounded where ids do not), and keys moving or waiting to be dealt again."""
    per_consumer = _gauge(
        "durable_consumer_keys",
        "Keyed durables: keys with an event out with the consumers of this name.",
        [*DURABLE, "consumer"],
    )
    moving = _gauge(
        "durable_keys_moving",
        "Keyed durables: keys out with a consumer that no longer owns them; each moves to "
        "its new owner once that event is acknowledged.",
        DURABLE,
    )
    waiting = _gauge(
        "durable_keys_waiting",
        "Keyed durables: keys whose event out was handed back (rolled back, or its holder "
        "left): it is dealt again before the key's later events.",
        DURABLE,
    )
    for c in figures.channels:
        for d in c.durables:
            if d.keys is None:
                continue
            labels = [c.info.name, d.info.name]
            by_name: dict[str, int] = {}
            for consumer in d.consumers:
                by_name[consumer.name] = by_name.get(consumer.name, 0) + (consumer.keys or 0)
            for name, count in sorted(by_name.items()):
                per_consumer.add_metric([*labels, name], count)
            moving.add_metric(labels, d.keys.moving)
            waiting.add_metric(labels, d.keys.waiting)
    return [per_consumer, moving, waiting]


def _sessions(figures: Figures, per_session: bool) -> list[GaugeMetricFamily]:
    states = _gauge(
        "sessions",
        "Durable client sessions by state (live, away within its keep-alive, expired).",
        ["state"],
    )
    queued = _gauge(
        "sessions_queue_depth",
        "Events queued for sessions and not yet "
        "acknowledged, summed over the sessions in each state.",
        ["state"],
    )
    fullest = _gauge(
        "sessions_queue_fill_ratio_max",
        "The fullest session queue over its current limit (0..1; 0 when no session has a limit).",
        [],
    )
    count = dict.fromkeys(("live", "away", "expired"), 0)
    depth = dict.fromkeys(count, 0)
    ratio = 0.0
    for s in figures.sessions:
        count[s.state] += 1
        depth[s.state] += s.queue_depth
        limit = _queue_limit(s.live, s.max_depth, s.disconnected_max_depth)
        if limit:
            ratio = max(ratio, s.queue_depth / limit)
    for state in count:
        states.add_metric([state], count[state])
        queued.add_metric([state], depth[state])
    fullest.add_metric([], ratio)
    found = [states, queued, fullest]
    if per_session:
        queue = _gauge(
            "session_queue_depth",
            "Events queued for the session and not yet acknowledged.",
            ["session"],
        )
        connected = _gauge(
            "session_connected", "1 while a client holds the session live, else 0.", ["session"]
        )
        for s in figures.sessions:
            queue.add_metric([s.record.id], s.queue_depth)
            connected.add_metric([s.record.id], 1 if s.live else 0)
        found += [queue, connected]
    return found


def _queue_limit(live: bool, max_depth: int | None, dmax: int | None) -> int | None:
    if live or dmax is None:
        return max_depth
    return max(dmax, max_depth or 0)


def _server(figures: Figures) -> list[GaugeMetricFamily]:
    h = parse_health(figures.server)
    used = _gauge("server_memory_used_bytes", "Memory the server uses.", [])
    used.add_metric([], h.used_memory)
    limit = _gauge("server_memory_max_bytes", "The server's maxmemory; 0: no limit.", [])
    limit.add_metric([], h.maxmemory)
    info = _gauge(
        "server_info",
        "The server's role and eviction policy (value 1).",
        ["role", "eviction_policy"],
    )
    info.add_metric([h.role, h.policy], 1)
    safe = _gauge(
        "server_eviction_safe",
        "1 unless the server may evict keys (a maxmemory with a policy other than noeviction).",
        [],
    )
    safe.add_metric([], 0 if h.evicting else 1)
    aof = _gauge("server_aof_enabled", "1 while the server writes its append-only file.", [])
    aof.add_metric([], 1 if h.aof else 0)
    replicas = _gauge("server_connected_replicas", "Replicas connected to the server.", [])
    replicas.add_metric([], h.replicas)
    return [used, limit, info, safe, aof, replicas]


def _gauge(name: str, documentation: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", documentation, labels=labels)


def _counter(name: str, documentation: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(f"{PREFIX}_{name}", documentation, labels=labels)


# -- the collector --------------------------------------------------------------------------


class DurablesCollector(Collector):
    """Reads the namespace of `client` at every scrape; `durables_up` is 0 when it cannot
    (nor can get a client, when given a function that returns one).

    Scrapes are taken one at a time (an HTTP server may call from several threads).
    """

    def __init__(self, client: Client | Callable[[], Client], per_session: bool = False) -> None:
        self.client = client
        self.per_session = per_session
        self._lock = threading.Lock()

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            try:
                client = self.client() if callable(self.client) else self.client
                figures: Figures | None = snapshot(client)
            except (DurablesError, RedisError) as exc:
                log.warning("durables metrics: cannot read the server: %s", exc)
                figures = None
        return families(figures, self.per_session)

    def describe(self) -> Iterable[Metric]:
        """The families without samples, so registering reads nothing from the server."""
        return families(Figures(0, {}, [], [], []), self.per_session)


def collector(
    client: Client | Callable[[], Client], per_session: bool = False
) -> DurablesCollector:
    """A collector for an application's own registry: `REGISTRY.register(collector(c))`."""
    return DurablesCollector(client, per_session)


def registry(client: Client | Callable[[], Client], per_session: bool = False) -> CollectorRegistry:
    """A registry of its own holding only the durables collector."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector(client, per_session))
    return reg


def exposition(client: Client, per_session: bool = False) -> str:
    """The Prometheus text exposition of the namespace now."""
    return generate_latest(registry(client, per_session)).decode()


__all__ = [
    "DurablesCollector",
    "collector",
    "exposition",
    "families",
    "registry",
    "snapshot",
]
