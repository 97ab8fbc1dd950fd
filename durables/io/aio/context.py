"""What every asyncio object below the client is handed: `durables.io.context.BaseContext`
with the asyncio executor and runtime (the same settings, clock and key layout)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..context import BaseContext

if TYPE_CHECKING:
    from .executor import AsyncExecutor
    from .runtime import AsyncRuntime


@dataclass(frozen=True)
class AsyncContext(BaseContext):
    """One asyncio client's executor, settings, runtime (tasks) and clock."""

    executor: AsyncExecutor
    runtime: AsyncRuntime
    pause: Callable[[float], object] = field(default=asyncio.sleep)


__all__ = ["AsyncContext"]
