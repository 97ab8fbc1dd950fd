"""Housekeeping: trimming acknowledged and expired events, deleting channels.

Redis has no timers for us, so this runs when a client happens to be busy
(`Client.maybe_housekeep`) and on demand (`client.housekeep()`, the CLI's
`durables housekeep [--every S]`). The work itself is in `lua/trim.lua`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from . import keys
from .errors import ChannelNotFound, DurablesError
from .replies import server_errors, text

if TYPE_CHECKING:
    from .client import Client

DELETE_TRIES = 5


@dataclass
class HousekeepReport:
    """What one round of housekeeping did."""

    channels: int = 0
    removed: dict[str, int] = field(default_factory=dict)
    expired_sessions: list[str] = field(default_factory=list)

    @property
    def total_removed(self) -> int:
        return sum(self.removed.values())


def _durable_names(client: Client, channel: str) -> list[str]:
    raw = client.redis.hkeys(client.keys(channel).durables)
    return sorted(text(n) for n in raw)


def trim_channel(
    client: Client, channel: str, mode: Literal["retain", "purge"] = "retain", up_to: str = ""
) -> int:
    """Trim one channel: 'retain' drops what every durable acked and what outlived the ttl;
    'purge' drops everything up to `up_to` ('+' for all). Returns how many events went."""
    k = client.keys(channel)
    with server_errors(f"trim {channel!r}"):
        if not client.redis.exists(k.meta):
            raise ChannelNotFound(f"channel {channel!r} does not exist")
        durables = _durable_names(client, channel)
        script_keys = [k.stream, k.meta, k.durables]
        for name in durables:
            script_keys += [k.redeliveries(name), k.keep(name)]
        removed = client.scripts.trim(
            keys=script_keys, args=[int(time.time() * 1000), mode, up_to, *durables]
        )
    return int(removed)


def reap_channel(client: Client, channel: str) -> None:
    """Detach dead consumers of the channel's shared and serial durables (their events go
    back to be dealt again), for durables no live consumer is fetching from."""
    k = client.keys(channel)
    with server_errors(f"reap {channel!r}"):
        specs = client.redis.hgetall(k.durables)
        for name, spec in specs.items():
            if json.loads(spec).get("kind") == "exclusive":
                continue
            d = text(name)
            client.scripts.reap_shared(
                keys=[k.stream, k.members(d), k.alive(d), k.ring(d), k.redo(d), k.delayed(d),
                      k.redeliveries(d)],
                args=[d],
            )  # fmt: skip


def housekeep(client: Client) -> HousekeepReport:
    """One round over every channel of the client's namespace."""
    from .session_store import reap_expired

    report = HousekeepReport(expired_sessions=reap_expired(client))
    for channel in client.channel_names():
        try:
            reap_channel(client, channel)
            removed = trim_channel(client, channel)
        except ChannelNotFound:
            continue  # deleted since it was listed
        report.channels += 1
        report.removed[channel] = removed
    return report


def delete_channel(client: Client, channel: str) -> bool:
    """Delete a channel with its events and durables; False if it did not exist."""
    k = client.keys(channel)
    for _ in range(DELETE_TRIES):
        with server_errors(f"delete {channel!r}"):
            durables = _durable_names(client, channel)
            script_keys = [k.stream, k.meta, k.durables, k.last_values, k.last_ids]
            for name in durables:
                script_keys += k.per_durable(name)
            done = int(client.scripts.delete_channel(keys=script_keys, args=durables))
        if done >= 0:
            with server_errors(f"delete {channel!r}"):
                client.redis.srem(keys.registry(client.namespace), channel)
            return done == 1
    raise DurablesError(f"channel {channel!r} kept changing while being deleted; try again")
