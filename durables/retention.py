"""Trimming a channel, detaching dead consumers, deleting a channel.

The work itself is in `lua/trim.lua`, `lua/reap_shared.lua` and
`lua/delete_channel.lua`; here the durables are listed first (a script must be
given every key it touches), and a delete that raced a new durable is tried again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from .errors import ChannelNotFound, DurablesError
from .ops import channels as channel_ops
from .ops import housekeeping as ops

if TYPE_CHECKING:
    from .context import Context
    from .keys import ChannelKeys

DELETE_TRIES = 5


def trim_channel(
    ctx: Context, k: ChannelKeys, mode: Literal["retain", "purge"] = "retain", up_to: str = ""
) -> int:
    """Trim one channel: 'retain' drops what every durable acked and what outlived the ttl;
    'purge' drops everything up to `up_to` ('+' for all). Returns how many events went."""
    exists, durables = ctx.executor.run_all([channel_ops.exists(k), channel_ops.durable_names(k)])
    if not exists:
        raise ChannelNotFound(f"channel {k.channel!r} does not exist")
    return ctx.executor.run(ops.trim(k, durables, mode, up_to))


def nack_expired(ctx: Context, k: ChannelKeys) -> int:
    """Nacks for ack-required events whose timeout passed unacknowledged; how many."""
    return ctx.executor.run(ops.nack_expired(k))


def reap_channel(ctx: Context, k: ChannelKeys) -> int:
    """Detach dead consumers of the channel's shared and serial durables (their events go
    back to be dealt again), and hand back orphans' events: how many orphaned events."""
    kinds = ctx.executor.run(ops.specs(k))
    ttl_ms = int(ctx.settings.orphan_ttl_s * 1000)
    names = [name for name, kind in sorted(kinds.items()) if kind != "exclusive"]
    return sum(ctx.executor.run_all([ops.reap(k, name, ttl_ms) for name in names])) if names else 0


def delete_channel(ctx: Context, k: ChannelKeys) -> bool:
    """Delete a channel with its events and durables; False if it did not exist."""
    for _ in range(DELETE_TRIES):
        durables = ctx.executor.run(channel_ops.durable_names(k))
        done = ctx.executor.run(ops.delete_channel(k, durables))
        if done >= 0:
            ctx.executor.run(ops.unregister(k))
            return done == 1
    raise DurablesError(f"channel {k.channel!r} kept changing while being deleted; try again")
