"""Prometheus metrics of one namespace, read from the server at scrape time.

`collector(client)` is a `prometheus_client` collector: register it in an application's
own registry (or use `registry(client)`), and every scrape reads the channels, durables
and sessions afresh. `exposition(client)` is the text format, as `durables metrics`
prints it. Nothing here changes server state: a scrape only reads.

Most numbers come from the public API (`client.channels()`, `channel.durables()`,
`client.sessions()`, `client.session_live()`). Three have no public call yet, so they
are read with plain read-only commands through `client.redis`, on the keys
`client.keys(channel)` names: a session's queue (its consumer group's lag + pending, as
`session_queue.lua` counts it, without that script's side effects), the redelivered
events of a durable (its redelivery counts hash holds only pending ids counted above
zero) and the age of its oldest pending event (`XPENDING` summary).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError, ResponseError

from .errors import ChannelNotFound, DurableNotFound, DurablesError
from .ids import key as id_key
from .keys import session_group
from .ops.durables import planned_after

if TYPE_CHECKING:
    from .client import Client
    from .keys import ChannelKeys
    from .records import DurableInfo, SessionRecord

log = logging.getLogger(__name__)

PREFIX = "durables"


@dataclass(frozen=True)
class DurableSample:
    """One durable's numbers at one scrape."""

    channel: str
    durable: str
    depth: int
    transaction_depth: int
    consumers: int
    redeliveries: int
    """Pending events (delivered, or handed back) whose redelivery count is above zero."""
    dead_letters: int
    oldest_unacked_age_s: float
    """Age of the oldest pending event (by its id's time, on the server's clock); 0 if none."""


@dataclass(frozen=True)
class SessionSample:
    """One durable client session's numbers at one scrape."""

    session: str
    queue_depth: int
    """Events queued for the session and not yet acknowledged, over all its channels."""
    connected: bool


@dataclass(frozen=True)
class Snapshot:
    """Everything a scrape reports, read in one go."""

    channels: dict[str, int]
    """Channel name -> length."""
    durables: list[DurableSample]
    sessions: list[SessionSample]


# -- reading --------------------------------------------------------------------------------


def snapshot(client: Client) -> Snapshot:
    """Read the namespace now. A channel or durable deleted meanwhile is left out."""
    now_ms = client.server_ms()
    lengths: dict[str, int] = {}
    durables: list[DurableSample] = []
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for info in client.channels():
        try:
            found = client.get_channel(info.name).durables()
        except (ChannelNotFound, DurableNotFound):
            continue
        k = client.keys(info.name)
        lengths[info.name] = info.length
        groups[info.name] = _groups(client, k)
        durables += _durable_samples(client, k, found, groups[info.name], now_ms)
    sessions = [
        SessionSample(r.id, _session_depth(client, r, groups), client.session_live(r.id))
        for r in client.sessions()
    ]
    return Snapshot(lengths, durables, sessions)


def _groups(client: Client, k: ChannelKeys) -> dict[str, dict[str, Any]]:
    """The consumer groups on a channel's stream by name (durables' and sessions')."""
    try:
        reply = client.redis.xinfo_groups(k.stream)
    except ResponseError as exc:
        if str(exc).startswith("no such key"):  # no stream yet: so no groups either
            return {}
        raise
    return {_text(g["name"]): g for g in reply}


def _durable_samples(
    client: Client,
    k: ChannelKeys,
    infos: Sequence[DurableInfo],
    groups: dict[str, dict[str, Any]],
    now_ms: int,
) -> Iterator[DurableSample]:
    """The samples of a channel's durables: the raw reads in one pipeline."""
    present = [i for i in infos if i.name in groups]  # a durable deleted meanwhile: left out
    pipe = client.redis.pipeline(transaction=False)
    for info in present:
        pipe.hlen(k.redeliveries(info.name))
        pipe.xlen(k.dead(info.name))
        pipe.xpending(k.stream, info.name)
        pipe.hgetall(k.planned(info.name))
    replies = pipe.execute()
    for n, info in enumerate(present):
        redelivered, dead, pending, batches = replies[4 * n : 4 * n + 4]
        planned = planned_after(batches, _text(groups[info.name]["last-delivered-id"]))
        yield DurableSample(
            channel=info.channel,
            durable=info.name,
            depth=info.depth,
            transaction_depth=info.transaction_depth,
            consumers=len(info.consumers),
            redeliveries=int(redelivered),
            dead_letters=int(dead),
            oldest_unacked_age_s=_age_s(pending, now_ms, planned.first),
        )


def _age_s(pending: dict[str, Any], now_ms: int, planned: str | None = None) -> float:
    """Seconds since the oldest pending event of an `XPENDING` summary was published, or
    the oldest of a batch a Spark query planned (`planned`), whichever is older."""
    oldest = [planned] if planned else []
    if pending.get("pending") and pending.get("min") is not None:
        oldest.append(_text(pending["min"]))
    if not oldest:
        return 0.0
    published_ms = min(id_key(i)[0] for i in oldest)
    return max(0, now_ms - published_ms) / 1000


def _session_depth(client: Client, record: SessionRecord, groups: dict[str, dict[str, Any]]) -> int:
    """What the session has not acknowledged, over the channels it is interested in."""
    name = session_group(record.id)
    depth = 0
    for channel in record.interests:
        group = groups.get(channel, {}).get(name)
        if group is not None:
            depth += int(group["pending"]) + _lag(client, client.keys(channel), group)
    return depth


def _lag(client: Client, k: ChannelKeys, group: dict[str, Any]) -> int:
    """Entries the group has not read yet; counted by hand when the server does not know
    (after an `XGROUP SETID` without `ENTRIESREAD`)."""
    if group.get("lag") is not None:
        return int(group["lag"])
    unread = client.redis.xrange(k.stream, "(" + _text(group["last-delivered-id"]), "+")
    return len(unread or [])


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


# -- presenting -----------------------------------------------------------------------------


SESSION_HELP = {
    "session_queue_depth": "Events queued for the session and not yet acknowledged.",
    "session_connected": "1 while a client holds the session live, else 0.",
}
DURABLE_HELP = {
    "durable_depth": "Events waiting to be delivered to the durable.",
    "durable_transaction_depth": "Events delivered to the durable's consumers and not yet "
    "acknowledged.",
    "durable_consumers": "Consumers attached to the durable.",
    "durable_redeliveries": "Pending events of the durable that were delivered before "
    "(redelivery count above zero).",
    "durable_dead_letters": "Events the durable gave up on after max_deliveries.",
    "durable_oldest_unacked_age_seconds": "Age of the durable's oldest event delivered (or "
    "handed back) and not yet acknowledged, from its publish time; 0 when none is.",
}
"""In the order of `_durable_values`."""


def families(snap: Snapshot | None) -> list[GaugeMetricFamily]:
    """The metric families of a snapshot; None (the server could not be read): only `up` 0."""
    up = GaugeMetricFamily(f"{PREFIX}_up", "1 if the durables server could be read, else 0.")
    up.add_metric([], 0 if snap is None else 1)
    if snap is None:
        return [up]
    length = _gauge("channel_length", "Events in the channel.", ["channel"])
    for channel, count in snap.channels.items():
        length.add_metric([channel], count)
    per_durable = [_gauge(n, h, ["channel", "durable"]) for n, h in DURABLE_HELP.items()]
    for d in snap.durables:
        for family, value in zip(per_durable, _durable_values(d), strict=True):
            family.add_metric([d.channel, d.durable], value)
    queue, connected = (_gauge(n, h, ["session"]) for n, h in SESSION_HELP.items())
    for s in snap.sessions:
        queue.add_metric([s.session], s.queue_depth)
        connected.add_metric([s.session], 1 if s.connected else 0)
    return [up, length, *per_durable, queue, connected]


def _gauge(name: str, documentation: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", documentation, labels=labels)


def _durable_values(d: DurableSample) -> tuple[float, ...]:
    return (d.depth, d.transaction_depth, d.consumers, d.redeliveries, d.dead_letters,
            d.oldest_unacked_age_s)  # fmt: skip


# -- the collector --------------------------------------------------------------------------


class DurablesCollector(Collector):
    """Reads the namespace of `client` at every scrape; `durables_up` is 0 when it cannot
    (nor can get a client, when given a function that returns one).

    Scrapes are taken one at a time (an HTTP server may call from several threads).
    """

    def __init__(self, client: Client | Callable[[], Client]) -> None:
        self.client = client
        self._lock = threading.Lock()

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            try:
                client = self.client() if callable(self.client) else self.client
                snap: Snapshot | None = snapshot(client)
            except (DurablesError, RedisError) as exc:
                log.warning("durables metrics: cannot read the server: %s", exc)
                snap = None
        return families(snap)

    def describe(self) -> Iterable[Metric]:
        """The families without samples, so registering reads nothing from the server."""
        return families(Snapshot({}, [], []))


def collector(client: Client | Callable[[], Client]) -> DurablesCollector:
    """A collector for an application's own registry: `REGISTRY.register(collector(c))`."""
    return DurablesCollector(client)


def registry(client: Client | Callable[[], Client]) -> CollectorRegistry:
    """A registry of its own holding only the durables collector."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector(client))
    return reg


def exposition(client: Client) -> str:
    """The Prometheus text exposition of the namespace now."""
    return generate_latest(registry(client)).decode()


__all__ = [
    "DurableSample",
    "DurablesCollector",
    "SessionSample",
    "Snapshot",
    "collector",
    "exposition",
    "families",
    "registry",
    "snapshot",
]
