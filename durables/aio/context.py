"""What every asyncio object below the client is handed: the asyncio twin of
`durables.context.Context` (executor, settings, runtime, clock), with the same key layout."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import keys

if TYPE_CHECKING:
    from ..settings import Settings
    from .executor import AsyncExecutor
    from .runtime import AsyncRuntime


@dataclass(frozen=True)
class AsyncContext:
    """One asyncio client's executor, settings, runtime (tasks) and clock."""

    executor: AsyncExecutor
    settings: Settings
    runtime: AsyncRuntime
    clock: Callable[[], float] = field(default=time.monotonic)

    @property
    def namespace(self) -> str:
        return self.settings.namespace

    @property
    def lease_ms(self) -> int:
        return int(self.settings.lease_timeout_s * 1000)

    def keys(self, channel: str) -> keys.ChannelKeys:
        return keys.ChannelKeys(self.settings.namespace, channel)

    def touch(self, channel: str) -> None:
        """The channel changed: housekeeping will trim it in time."""
        self.runtime.housekeeper.touch(channel)


__all__ = ["AsyncContext"]
