"""What every object below the `Client` is handed instead of the Client itself.

Channels, durables, consumers and sessions need to send operations, read settings,
build keys, own threads and read a clock: nothing more. Handing them this keeps
every module below `client.py` free of it (no import circle), and lets an asyncio
client hand down the same things with its own executor.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import keys

if TYPE_CHECKING:
    from .executor import Executor
    from .runtime import Runtime
    from .settings import Settings


@dataclass(frozen=True)
class Context:
    """One client's executor, settings, runtime (threads) and clock."""

    executor: Executor
    settings: Settings
    runtime: Runtime
    clock: Callable[[], float] = field(default=time.monotonic)
    """Local monotonic seconds, for deadlines; the server's clock decides leases and expiry."""

    @property
    def namespace(self) -> str:
        return self.settings.namespace

    @property
    def lease_ms(self) -> int:
        return int(self.settings.lease_timeout_s * 1000)

    def keys(self, channel: str) -> keys.ChannelKeys:
        return keys.ChannelKeys(self.settings.namespace, channel)

    def touch(self, channel: str) -> None:
        """The channel changed (a publish, an ack): housekeeping will trim it in time."""
        self.runtime.housekeeper.touch(channel)


__all__ = ["Context"]
