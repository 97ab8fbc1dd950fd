"""What every object below the `Client` is handed instead of the Client itself.

Channels, durables, consumers and sessions need to send operations, read settings,
build keys, own threads and read a clock: nothing more. Handing them this keeps
every module below `client.py` free of it (no import circle), and lets the asyncio
client hand down the same things with its own executor and runtime (`BaseContext` is
both; the code both clients share is written against it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from .. import keys
from ..producers import Producer

if TYPE_CHECKING:
    from ..settings import Settings
    from .executor import Executor
    from .leases import Lease
    from .runtime import Runtime


class Epochs(Protocol):
    """What shared code reads of an executor, sync or asyncio."""

    @property
    def epoch(self) -> int: ...


class LeaseRegistry(Protocol):
    def add(self, lease: Lease) -> None: ...

    def remove(self, token: str) -> None: ...


class Touchable(Protocol):
    def touch(self, channel: str) -> None: ...


class Owner(Protocol):
    """What shared code uses of a runtime, sync or asyncio (all of it plain calls)."""

    @property
    def heartbeat(self) -> LeaseRegistry: ...

    @property
    def housekeeper(self) -> Touchable: ...


@dataclass(frozen=True)
class BaseContext:
    """One client's executor, settings, runtime (threads or tasks) and clock: what code
    both clients share sees of either client's context."""

    executor: Epochs
    settings: Settings
    runtime: Owner
    clock: Callable[[], float] = field(default=time.monotonic)
    """Local monotonic seconds, for deadlines; the server's clock decides leases and expiry."""
    pause: Callable[[float], object] = field(default=time.sleep)
    """Waits this many seconds (a flow's `call(pause, s)`): blocking, or awaitable."""
    producer: Producer = field(default_factory=Producer)
    """This client as an idempotent producer: every publish carries its id and a sequence."""

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


@dataclass(frozen=True)
class Context(BaseContext):
    """The sync client's context: its executor and its runtime of threads."""

    executor: Executor
    runtime: Runtime


__all__ = ["BaseContext", "Context", "Epochs", "LeaseRegistry", "Owner"]
