"""What every asyncio object below the client is handed: `durables.context.BaseContext`
with the asyncio executor and runtime (the same settings, clock and key layout)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..context import BaseContext

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class AsyncContext(BaseContext["AsyncExecutor", "AsyncRuntime"]):
    """One asyncio client's executor, settings, runtime (tasks) and clock."""


__all__ = ["AsyncContext"]
