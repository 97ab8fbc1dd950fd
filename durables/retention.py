"""Trimming a channel, detaching dead consumers, deleting a channel.

The work itself is in `lua/trim.lua`, `lua/reap_shared.lua` and
`lua/delete_channel.lua`; here the durables are listed first (a script must be
given every key it touches), and a delete that raced a new durable is tried again.
Flows (`ops.flows`) both clients drive.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Literal

from .errors import ChannelNotFoundError, DurablesError
from .ops import channels as channel_ops
from .ops import cleanup as ops
from .ops import sessions as session_ops
from .ops.flows import Flow, run, send

if TYPE_CHECKING:
    from .io.context import BaseContext
    from .keys import ChannelKeys
    from .records import Interest

log = logging.getLogger(__name__)

DELETE_TRIES = 5


def trim_channel(
    ctx: BaseContext, k: ChannelKeys, mode: Literal["retain", "purge"] = "retain", up_to: str = ""
) -> Flow[int]:
    """Trim one channel: 'retain' drops what every durable acked and what outlived the ttl;
    'purge' drops everything up to `up_to` ('+' for all). Returns how many events went."""
    exists, durables = yield from send([channel_ops.exists(k), channel_ops.durable_names(k)])
    if not exists:
        raise ChannelNotFoundError(f"channel {k.channel!r} does not exist")
    return (yield from run(ops.trim(k, durables, mode, up_to)))


def nack_expired(ctx: BaseContext, k: ChannelKeys) -> Flow[int]:
    """Nacks for ack-required events whose timeout passed unacknowledged, sent or not yet
    (Diffusion's ack-required rule: "the non-acknowledgment is notified", also for a session
    that never comes back); how many. An event not sent yet is nacked if it is of the
    session's interest."""
    recorded, unsent = yield from run(ops.nack_expired(k, ctx.lease_ms))
    interests: dict[str, Interest | None] = {}
    for event in unsent:
        if event.session_id not in interests:
            record = yield from run(session_ops.load(ctx.namespace, event.session_id))
            interests[event.session_id] = record.interests.get(k.channel) if record else None
        interest = interests[event.session_id]
        if interest is not None and session_ops.interest_matches(interest, event.key):
            log.warning(
                "session %r: event %s of %r expired before sent",
                event.session_id,
                event.event_id,
                k.channel,
            )
            yield from run(session_ops.nack(k, event.event_id, event.session_id, "unsent"))
            recorded += 1
    return recorded


def tidy_channel(ctx: BaseContext, k: ChannelKeys) -> Flow[int]:
    """What a client's housekeeper does for a channel it used: nack expired ack-required
    events, then trim; how many events went."""
    yield from nack_expired(ctx, k)
    return (yield from trim_channel(ctx, k))


def reap_channel(ctx: BaseContext, k: ChannelKeys) -> Flow[int]:
    """Detach dead consumers of the channel's shared and serial durables (their events go
    back to be dealt again), and hand back orphans' events: how many orphaned events."""
    kinds = yield from run(ops.specs(k))
    ttl_ms = int(ctx.settings.orphan_ttl_s * 1000)
    names = [name for name, kind in sorted(kinds.items()) if kind != "exclusive"]
    if not names:
        return 0
    return sum((yield from send([ops.reap(k, name, ttl_ms) for name in names])))


def delete_channel(ctx: BaseContext, k: ChannelKeys) -> Flow[bool]:
    """Delete a channel with its events and durables; False if it did not exist."""
    for _ in range(DELETE_TRIES):
        durables = yield from run(channel_ops.durable_names(k))
        done = yield from run(ops.delete_channel(k, durables))
        if done >= 0:
            yield from run(ops.unregister(k))
            return done == 1
    raise DurablesError(f"channel {k.channel!r} kept changing while being deleted; try again")
