"""The audit log of admin actions, kept on the server so that every tool (the console, the
CLI) writes to one place and a person reads it from any of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .ops import audit as ops
from .ops.flows import Flow, run
from .records import AuditEntry

if TYPE_CHECKING:
    from .io.context import BaseContext


def record(ctx: BaseContext, action: str, target: str, address: str, outcome: str) -> Flow[str]:
    """Note an admin action: `action` ('delete-durable'), `target` ('durable orders/billing'),
    `address` (where it came from) and `outcome` (what the tool reported)."""
    return (yield from run(ops.record(ctx.namespace, action, target, address, outcome)))


def entries(ctx: BaseContext, count: int = 100) -> Flow[list[AuditEntry]]:
    """The newest `count` entries, newest first."""
    return (yield from run(ops.entries(ctx.namespace, count)))


__all__ = ["entries", "record"]
