"""Operations of housekeeping: trim, reap dead consumers, delete a channel."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import keys
from .base import Op, as_int, command, script, text


def trim(
    k: keys.ChannelKeys, durables: Sequence[str], mode: Literal["retain", "purge"], up_to: str
) -> Op[int]:
    """`trim.lua` over the channel and its `durables` (as listed just before); events removed."""
    script_keys = [k.stream, k.meta, k.durables]
    for name in durables:
        script_keys += [k.redeliveries(name), k.keep(name)]
    return script(
        "trim", script_keys, [mode, up_to, *durables], parse=as_int, context=f"trim {k.channel!r}"
    )


def specs(k: keys.ChannelKeys) -> Op[dict[str, str]]:
    """Every durable of the channel: name -> kind."""

    def parse(reply: Any) -> dict[str, str]:
        return {text(n): str(json.loads(s).get("kind")) for n, s in (reply or {}).items()}

    return command("HGETALL", k.durables, parse=parse, context=f"reap {k.channel!r}")


def reap(k: keys.ChannelKeys, durable: str, orphan_ttl_ms: int) -> Op[int]:
    """Detach a shared or serial durable's consumers whose lease lapsed, and hand back the
    events of orphans (consumers it does not know, idle `orphan_ttl_ms`): how many."""
    d = durable
    return script(
        "reap_shared",
        [
            k.stream,
            k.members(d),
            k.alive(d),
            k.ring(d),
            k.redo(d),
            k.delayed(d),
            k.redeliveries(d),
            k.taps(d),
            k.tally(d),
        ],
        [d, orphan_ttl_ms],
        parse=as_int,
        context=f"reap {k.channel!r}",
    )


def delete_channel(k: keys.ChannelKeys, durables: Sequence[str]) -> Op[int]:
    """1 deleted, 0 it did not exist, -1 its durables changed since they were listed."""
    script_keys = [k.stream, k.meta, k.durables, *k.channel_level]
    for name in durables:
        script_keys += k.per_durable(name)
    return script(
        "delete_channel", script_keys, durables, parse=as_int, context=f"delete {k.channel!r}"
    )


def unregister(k: keys.ChannelKeys) -> Op[Any]:
    return command("SREM", keys.registry(k.ns), k.channel, context=f"delete {k.channel!r}")


@dataclass(frozen=True)
class Unsent:
    """An ack-required event whose timeout passed before a session read it."""

    session_id: str
    event_id: str
    key: str | None


def _expired(reply: Any) -> tuple[int, list[Unsent]]:
    recorded, noted = reply
    return as_int(recorded), [Unsent(text(s), text(e), text(k) or None) for s, e, k in noted]


def nack_expired(k: keys.ChannelKeys, lease_ms: int) -> Op[tuple[int, list[Unsent]]]:
    """Record a nack for every ack-required event a session was sent and let time out; how
    many, and the events whose timeout passed before a session away (idle past `lease_ms`)
    read them (to nack if of the session's interest: `ops.sessions.nack(..., 'unsent')`)."""
    return script(
        "nack_expired",
        [k.stream, k.nacks, k.meta, k.unsent_nacks],
        [lease_ms],
        parse=_expired,
        context=f"nacks of {k.channel!r}",
    )
