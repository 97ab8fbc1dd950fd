"""The operations one shared, serial or keyed consumer sends (layer 2, plain data): its
durable's keys, named once, and each script call and read as the server gets it. Its state
machine (`handout.SharedHandout`) decides which to send and with what; this says how."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from ... import keys
from ...ops.base import Op, as_bool, as_int, command, script
from ...reply_parsers import entries_read
from . import handout_replies as parsed

TAP_CLOSED = frozenset({"NOGROUP", "UNBLOCKED"})
"""A read through a tap the script did not open (or closed while it blocked) fails so."""


class HandoutOps:
    """The operations of consumer `consumer_id` on `durable`; `context` names it in errors."""

    def __init__(self, k: keys.ChannelKeys, durable: str, consumer_id: str, context: str) -> None:
        self.k, self.durable, self.id, self.context = k, durable, consumer_id, context
        d = durable
        self.fetch_keys = (
            k.stream, k.durables, k.members(d), k.alive(d), k.ring(d), k.redo(d),
            k.delayed(d), k.redeliveries(d), k.bell(d), k.dead(d), k.taps(d),
            k.tap(d, consumer_id), k.waits(d), k.door(d, consumer_id), k.tally(d), k.holds(d),
        )  # fmt: skip
        """The dispatcher's KEYS (lua/fetch_shared.lua)."""
        self.tap, self.door = self.fetch_keys[11], self.fetch_keys[13]
        # an idle consumer's wait sends these at every round (`wait_shared`): made once
        self._join_keys = (k.stream, k.ring(d), k.redo(d), k.taps(d), k.waits(d), self.tap,
                           self.door, k.redeliveries(d))  # fmt: skip
        self._settle_keys = (k.stream, k.members(d), k.alive(d), k.ring(d), k.redo(d),
                             k.delayed(d), k.redeliveries(d), k.bell(d), k.taps(d),
                             k.waits(d), self.tap, self.door, k.tally(d))  # fmt: skip
        self._ack_keys = (k.stream, k.members(d), k.redeliveries(d))  # and the bell (`ack`)

    def attach(self, window: int, lease_ms: int, tree: str, token: str, hashed: int) -> Op[Any]:
        k, d = self.k, self.durable
        return script("attach_shared", [k.durables, k.members(d), k.alive(d), k.ring(d), k.taps(d)],
                      [d, self.id, window, lease_ms, tree, token, hashed],
                      parse=parsed.attached, context=self.context)  # fmt: skip

    def renew(self, lease_ms: int) -> Op[bool]:
        return script("renew_member", [self.k.members(self.durable), self.k.alive(self.durable)],
                      [self.id, lease_ms], parse=as_bool, context=self.context)  # fmt: skip

    def dispatch(self, dispatcher: str, args: Sequence[Any]) -> Op[Any]:
        """The kind's dispatcher script (lua/fetch_shared.lua and its siblings)."""
        return script(dispatcher, self.fetch_keys, [self.durable, self.id, *args],
                      context=self.context)  # fmt: skip

    def pending(self, window: int) -> Op[list[Any]]:
        """This consumer's pending events."""
        return command("XREADGROUP", "GROUP", self.durable, self.id, "COUNT", window,
                       "STREAMS", self.k.stream, "0",
                       parse=entries_read, context=self.context)  # fmt: skip

    def tap_read(self, count: int, block_ms: int) -> Op[list[Any] | None]:
        """Up to `count` new events straight from the channel while the tap is open (None
        once it is not: the read then fails at once, or wakes when the tap is deleted);
        blocking `block_ms` (0: not at all)."""
        blocking = ("BLOCK", block_ms) if block_ms else ()
        return command("XREADGROUP", "GROUP", self.durable, self.id, "COUNT", count, *blocking,
                       "STREAMS", self.k.stream, self.tap, ">", ">",
                       parse=parsed.tapped, context=self.context, tolerate=TAP_CLOSED)  # fmt: skip

    def renew_tap(self, ttl_ms: int, acks: Sequence[Any]) -> Op[bool]:
        """The tap renewed for `ttl_ms`, with the acknowledgements (`Ledger.acks`) made only
        while it is open; false once it is closed."""
        k = self.k
        if not acks:
            return command("PEXPIRE", self.tap, ttl_ms, parse=as_bool, context=self.context)
        return script("ack_tap", [k.stream, self.tap, k.redeliveries(self.durable)],
                      [self.durable, ttl_ms, *acks], parse=as_bool,
                      context=self.context)  # fmt: skip

    def wait_shared(
        self, block_ms: int, room: int, acks: Sequence[Any], window: int
    ) -> list[Op[Any]]:
        """An idle shared consumer's wait, one pipeline (lib/settle.lua), its acks first:
        join the waiters, read its door until woken to watch, read the channel through its
        tap (which fails at once unless it was woken), settle what it took, and read its
        pending list. Each read blocks for half the time, so the whole wait stays within it."""
        d = self.durable
        half = max(1, block_ms // 2)
        return [script("join_shared", self._join_keys, [d, self.id, block_ms, *acks],
                       parse=as_int, context=self.context),
                command("XREADGROUP", "GROUP", d, self.id, "COUNT", 1, "BLOCK", half,
                        "STREAMS", self.door, ">", parse=parsed.tapped, context=self.context,
                        tolerate=TAP_CLOSED),
                command("XREADGROUP", "GROUP", d, self.id, "COUNT", room, "BLOCK", half,
                        "STREAMS", self.k.stream, self.tap, ">", ">", parse=parsed.tapped,
                        context=self.context, tolerate=TAP_CLOSED),
                script("settle_shared", self._settle_keys, [d, self.id, block_ms],
                       parse=parsed.settled, context=self.context),
                self.pending(window)]  # fmt: skip

    def leave(self, block_ms: int, keyed: bool) -> Op[int]:
        k, d = self.k, self.durable
        return script("leave_shared", [k.stream, k.ring(d), k.taps(d), k.waits(d), self.tap,
                                       self.door],
                      [d, self.id, block_ms, "keyed" if keyed else ""],
                      parse=as_int, context=self.context)  # fmt: skip

    def ack(self, token: str, acks: Sequence[Any], count: int, bell: bool, holds: bool) -> Op[Any]:
        """`count` acknowledgements (`Ledger.acks`) behind the membership check, ringing the
        bell with `bell` and freeing their keys with `holds` (keyed)."""
        keys: tuple[str, ...] = self._ack_keys
        if bell:
            keys = (*keys, self.fetch_keys[8], *((self.fetch_keys[15],) if holds else ()))
        return script("ack_shared", keys, [self.durable, self.id, token, *acks],
                      parse=partial(parsed.acks_made, self.context, count),
                      context=self.context)  # fmt: skip

    def rollback(self, delay_ms: int, ids: Sequence[str], kept: Sequence[str] | None) -> Op[Any]:
        """`ids` handed back; with `kept` (a holder that reads ahead), whatever else it
        holds and has not handed out goes back too (lua/rollback_shared.lua)."""
        k, d = self.k, self.durable
        args: list[Any] = [d, self.id, delay_ms, len(ids), *ids]
        if kept is not None:
            args += ["1", *kept]
        return script("rollback_shared", [k.stream, k.redo(d), k.delayed(d), k.redeliveries(d),
                                          k.bell(d), k.taps(d), k.tally(d)],
                      args, context=self.context)  # fmt: skip

    def release(self, handed: Sequence[str]) -> Op[Any]:
        k, d = self.k, self.durable
        return script("release_shared", [k.stream, k.members(d), k.alive(d), k.ring(d),
                                         k.redo(d), k.redeliveries(d), k.bell(d),
                                         k.taps(d), k.tally(d)],
                      [d, self.id, *handed], context=self.context)  # fmt: skip

    def wait(self, block_ms: int, newest: str, rung: str, chime: str | None) -> Op[Any]:
        """Block until the stream grows or the bell rings; a keyed consumer (`chime`: its
        own bell's newest id) also wakes when its own bell rings."""
        streams: tuple[str, ...] = (self.k.stream, self.k.bell(self.durable))
        ids: tuple[str, ...] = (newest, rung)
        if chime is not None:
            streams, ids = (*streams, self.door), (*ids, chime)
        return command("XREAD", "COUNT", 1, "BLOCK", block_ms, "STREAMS", *streams, *ids,
                       context=self.context)  # fmt: skip

    def counted(self) -> Op[int]:
        """Whether some event of the durable has a redelivery count."""
        return command("EXISTS", self.k.redeliveries(self.durable), parse=as_int,
                       context=self.context)  # fmt: skip


__all__ = ["TAP_CLOSED", "HandoutOps"]
