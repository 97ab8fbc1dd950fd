"""One round of housekeeping: expired sessions, dead consumers, acknowledged and expired
events, over every channel of a namespace.

Redis has no timers for us, so this runs on demand (`client.housekeep()`, the CLI's
`durables housekeep [--every S]`), and for the channels a client uses on its
housekeeper thread (`durables.io.runtime.Housekeeper`). The work itself is in Lua; the
round is a flow (`ops.flows`) both clients drive.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .errors import ChannelNotFoundError
from .ops import channels as channel_ops
from .ops.flows import Flow, run
from .records import HousekeepReport
from .retention import nack_expired, reap_channel, trim_channel
from .sessions.store import reap

if TYPE_CHECKING:
    from .io.context import BaseContext

log = logging.getLogger(__name__)


def housekeep(ctx: BaseContext) -> Flow[HousekeepReport]:
    """One round over every channel of the namespace."""
    expired, closed = yield from reap(ctx)
    report = HousekeepReport(expired_sessions=expired, closed_sessions=closed)
    for channel in (yield from run(channel_ops.names(ctx.namespace))):
        k = ctx.keys(channel)
        try:
            orphans = yield from reap_channel(ctx, k)
            yield from nack_expired(ctx, k)
            removed = yield from trim_channel(ctx, k)
        except ChannelNotFoundError:
            continue  # deleted since it was listed
        report.channels += 1
        report.removed[channel] = removed
        if orphans:
            report.orphans[channel] = orphans
            log.warning(
                "%d events of %r were pending for consumers no durable knows; handed back",
                orphans,
                channel,
            )
    return report


__all__ = ["HousekeepReport", "housekeep"]
