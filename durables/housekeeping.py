"""One round of housekeeping: expired sessions, dead consumers, acknowledged and expired
events, over every channel of a namespace.

Redis has no timers for us, so this runs on demand (`client.housekeep()`, the CLI's
`durables housekeep [--every S]`), and for the channels a client uses on its
housekeeper thread (`durables.runtime.Housekeeper`). The work itself is in Lua.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .errors import ChannelNotFound
from .ops import channels as channel_ops
from .records import HousekeepReport
from .retention import nack_expired, reap_channel, trim_channel
from .session_store import reap_expired

if TYPE_CHECKING:
    from .context import Context

log = logging.getLogger(__name__)


def housekeep(ctx: Context) -> HousekeepReport:
    """One round over every channel of the namespace."""
    report = HousekeepReport(expired_sessions=reap_expired(ctx))
    for channel in ctx.executor.run(channel_ops.names(ctx.namespace)):
        k = ctx.keys(channel)
        try:
            orphans = reap_channel(ctx, k)
            nack_expired(ctx, k)
            removed = trim_channel(ctx, k)
        except ChannelNotFound:
            continue  # deleted since it was listed
        report.channels += 1
        report.removed[channel] = removed
        if orphans:
            report.orphans[channel] = orphans
            log.warning(
                "%d events of %r were pending for consumers no durable knows; handed back",
                orphans, channel,
            )  # fmt: skip
    return report


__all__ = ["HousekeepReport", "housekeep"]
