"""An operation as plain data: what to send, to which keys, and how to read the reply.

Nothing here does I/O. An executor (sync now, asyncio later) sends operations and hands
each reply to the operation's parser, so both clients share every command and parser,
and tests can check the exact command without a server.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..reply_parsers import text

T = TypeVar("T")


def same(reply: Any) -> Any:
    """The reply as redis-py parsed it."""
    return reply


def as_int(reply: Any) -> int:
    return int(reply)


def as_bool(reply: Any) -> bool:
    return bool(reply)


def texts(reply: Any) -> list[str]:
    """A list or set of names, decoded and sorted."""
    return sorted(text(item) for item in reply or ())


@dataclass(frozen=True, slots=True)
class Op(Generic[T]):
    """One server operation: a plain command, or a call of one Lua script of `durables/lua/`.

    For a command `args` is the whole command; for a script it is the script's ARGV and
    `keys` its KEYS (all in one hash slot). `context` names what the operation is about,
    for error messages.
    """

    args: tuple[Any, ...]
    parse: Callable[[Any], T]
    script: str | None = None
    keys: tuple[str, ...] = ()
    context: str = ""
    tolerate: frozenset[str] = frozenset()
    """Error words (e.g. BUSYGROUP) whose error reply goes to `parse` instead of raising."""

    def wire(self, sha: str = "") -> tuple[Any, ...]:
        """The command as sent; a script call needs its SHA1."""
        if self.script is None:
            return self.args
        return ("EVALSHA", sha, len(self.keys), *self.keys, *self.args)


def command(
    *args: Any,
    parse: Callable[[Any], T] = same,
    context: str = "",
    tolerate: frozenset[str] = frozenset(),
) -> Op[T]:
    """A plain Redis command, e.g. `command("XLEN", key, parse=as_int)`."""
    return Op(args, parse, None, (), context, tolerate)


def script(
    name: str,
    keys: Sequence[str],
    args: Sequence[Any],
    *,
    parse: Callable[[Any], T] = same,
    context: str = "",
) -> Op[T]:
    """A call of `lua/<name>.lua` with its KEYS and ARGV."""
    return Op(tuple(args), parse, name, tuple(keys), context)


__all__ = ["Op", "as_bool", "as_int", "command", "same", "script", "text", "texts"]
