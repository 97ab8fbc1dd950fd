"""Operations on durables: create, load, describe, count, delete, dead letters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import ids, keys
from ..records import DeadLetter, DurableSpec
from .base import Op, as_bool, command, script, text, texts

POOL = "_pool"
"""The dispatcher's pseudo-consumer: events waiting to be dealt (again) are pending under it."""
SCAN_CHUNK = 1000


def _about(k: keys.ChannelKeys, name: str) -> str:
    return f"durable {name!r} on {k.channel!r}"


def _stored_spec(reply: Any) -> DurableSpec:
    return DurableSpec.from_json(reply[1])


def create(
    k: keys.ChannelKeys, name: str, spec: DurableSpec, group_start: str, must_exist: str
) -> Op[DurableSpec]:
    """Get or create; the stored spec comes back (it wins over the one asked for)."""
    return script(
        "create_durable",
        [k.stream, k.meta, k.durables],
        [name, spec.to_json(), group_start, must_exist],
        parse=_stored_spec,
        context=_about(k, name),
    )


def _spec_or_none(reply: Any) -> DurableSpec | None:
    return None if reply is None else DurableSpec.from_json(reply)


def load_spec(k: keys.ChannelKeys, name: str) -> Op[DurableSpec | None]:
    return command("HGET", k.durables, name, parse=_spec_or_none, context=_about(k, name))


def groups(k: keys.ChannelKeys, name: str) -> Op[list[dict[str, Any]]]:
    """`XINFO GROUPS` of the channel's stream, as redis-py parses it."""
    return command("XINFO GROUPS", k.stream, parse=list, context=_about(k, name))


def find_group(found: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((g for g in found if text(g["name"]) == name), None)


def _pool_size(summary: Any) -> int:
    for consumer in summary.get("consumers") or ():
        if text(consumer["name"]) == POOL:
            return int(consumer["pending"])
    return 0


def pool_size(k: keys.ChannelKeys, name: str) -> Op[int]:
    """Events pending under the dispatcher's pool: handed back, waiting to be dealt."""
    return command("XPENDING", k.stream, name, parse=_pool_size, context=_about(k, name))


@dataclass(frozen=True)
class Planned:
    """Events a Spark query planned over the durable and has not committed: they are
    after the group's position, so its lag counts them though they are handed out."""

    events: int
    first: str | None
    """The oldest of them (None: none)."""
    last: str | None
    """The newest of them (None: none)."""


def planned(k: keys.ChannelKeys, name: str) -> Op[Any]:
    """The durable's planned batches (`spark/lua/plan.lua`), for `planned_after`."""
    return command("HGETALL", k.planned(name), context=_about(k, name))


def planned_after(reply: Any, position: str) -> Planned:
    """The batches of an `HGETALL` of the planned record that lie after `position`."""
    at, events, first, last = ids.key(position), 0, None, None
    for end, value in (reply or {}).items():
        end = text(end)
        if ids.key(end) <= at:
            continue  # committed, or consumed since
        count, _, start = text(value).split(" ")
        events += int(count)
        if first is None or ids.key(start) < ids.key(first):
            first = start
        if last is None or ids.key(end) > ids.key(last):
            last = end
    return Planned(events, first, last)


def _counted(reply: Any) -> tuple[int, str]:
    found, last = reply
    return int(found), text(last)


def count_matching(
    k: keys.ChannelKeys, name: str, tree: str, position: str, until: str = "+"
) -> Op[tuple[int, str]]:
    """Events after `position` (up to `until`, inclusive) matching the filter tree, in one
    slice: (count, where to go on, '' when done)."""
    return script(
        "count_matching",
        [k.stream],
        [tree, position, SCAN_CHUNK, "count", until],
        parse=_counted,
        context=_about(k, name),
    )


def _oldest_pending(summary: Any) -> str | None:
    if not isinstance(summary, dict) or not summary.get("pending"):
        return None
    return text(summary["min"]) if summary.get("min") is not None else None


def oldest_pending(k: keys.ChannelKeys, name: str) -> Op[str | None]:
    """The id of the durable's oldest pending event (None: nothing pending)."""
    return command("XPENDING", k.stream, name, parse=_oldest_pending, context=_about(k, name))


def delete(k: keys.ChannelKeys, name: str) -> Op[bool]:
    return script(
        "delete_durable",
        [k.stream, k.durables, *k.per_durable(name)],
        [name],
        parse=as_bool,
        context=_about(k, name),
    )


def members(k: keys.ChannelKeys, name: str) -> Op[list[str]]:
    """The consumers attached to a shared or serial durable."""
    return command("HKEYS", k.members(name), parse=texts, context=_about(k, name))


def _holder(reply: Any) -> list[str]:
    return [text(reply)] if reply else []


def holder(k: keys.ChannelKeys, name: str) -> Op[list[str]]:
    """The consumer holding an exclusive durable's lease, if any."""
    return command("GET", k.lease(name), parse=_holder, context=_about(k, name))


def _dead_letter(entry_id: Any, fields: Any) -> DeadLetter:
    key = fields.get(b"k")
    return DeadLetter(
        id=text(entry_id),
        origin_id=text(fields.get(b"origin", b"")),
        data=fields.get(b"d", b""),
        key=text(key) if key is not None else None,
        raw_properties=fields.get(b"p"),
        reason=text(fields.get(b"reason", b"")),
        deliveries=int(fields.get(b"deliveries", b"0")),
    )


def _dead_letters(reply: Any) -> list[DeadLetter]:
    return [_dead_letter(entry_id, fields or {}) for entry_id, fields in reply or []]


def dead_letters(k: keys.ChannelKeys, name: str, count: int | None) -> Op[list[DeadLetter]]:
    """The durable's dead letters, oldest first."""
    limit = () if count is None else ("COUNT", count)
    return command(
        "XRANGE",
        k.dead(name),
        "-",
        "+",
        *limit,
        parse=_dead_letters,
        context=f"dead letters of {name!r}",
    )


def drop_dead_letters(k: keys.ChannelKeys, name: str, ids: list[str]) -> Op[Any]:
    return command("XDEL", k.dead(name), *ids, context=f"dead letters of {name!r}")
