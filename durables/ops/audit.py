"""The audit log's commands as plain data: a capped stream in the namespace, one entry per
admin action (what, on what, from which address, the outcome); its ids say when."""

from __future__ import annotations

from typing import Any

from .. import keys
from ..ids import key as id_key
from ..records import AuditEntry
from .base import Op, command, text

KEPT = 10_000
"""About this many entries are kept (the stream is trimmed, approximately, past it)."""


def record(ns: str, action: str, target: str, address: str, outcome: str) -> Op[str]:
    """Append one entry; returns its id."""
    return command(
        "XADD",
        keys.audit(ns),
        "MAXLEN",
        "~",
        KEPT,
        "*",
        "action",
        action,
        "target",
        target,
        "address",
        address,
        "outcome",
        outcome,
        parse=text,
        context="audit",
    )


def _entries(reply: Any) -> list[AuditEntry]:
    found = []
    for raw_id, fields in reply or ():
        entry_id = text(raw_id)
        if isinstance(fields, list | tuple):  # unparsed: field, value, field, value, ...
            fields = dict(zip(fields[::2], fields[1::2], strict=True))
        got = {text(k): text(v) for k, v in (fields or {}).items()}
        found.append(
            AuditEntry(
                entry_id,
                id_key(entry_id)[0],
                got.get("action", ""),
                got.get("target", ""),
                got.get("address", ""),
                got.get("outcome", ""),
            )
        )
    return found


def entries(ns: str, count: int) -> Op[list[AuditEntry]]:
    """The newest `count` entries, newest first."""
    return command(
        "XREVRANGE", keys.audit(ns), "+", "-", "COUNT", count, parse=_entries, context="audit"
    )


__all__ = ["KEPT", "entries", "record"]
