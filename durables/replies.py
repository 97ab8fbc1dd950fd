"""Reading server replies: our errors for error replies (by prefix), stream read replies.

Lua scripts report expected failures as error replies that start with a word
(`NOCHANNEL`, `INUSE`, ...); Redis itself uses `NOGROUP`, `BUSYGROUP`, `NOPERM`.
Translation is by that word, never by swallowing every `ResponseError`. Pure: the
executor calls these on what came back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from redis.exceptions import NoPermissionError, ResponseError

from .errors import (
    AccessDeniedError,
    ChannelFullError,
    ChannelNotFound,
    ConnectionLostError,
    DurableInUseError,
    DurableNotFound,
    DurablesError,
    InvalidStartError,
    LeaseLostError,
    ReplicationError,
    StalePublishError,
)

if TYPE_CHECKING:
    from redis import Redis
    from redis.cluster import RedisCluster

Translate = Callable[[str], DurablesError]

_BY_PREFIX: dict[str, Translate] = {
    "NOCHANNEL": lambda rest: ChannelNotFound(rest),
    "NODURABLE": lambda rest: DurableNotFound(rest),
    "NOGROUP": lambda rest: DurableNotFound(f"no consumer group: {rest}"),
    "INUSE": DurableInUseError.from_reply,
    "LEASELOST": lambda rest: LeaseLostError(rest),
    "DETACHED": lambda rest: LeaseLostError(rest),
    "FULL": lambda rest: ChannelFullError(f"the channel is at its capacity of {rest} events"),
    "NOSTART": lambda rest: InvalidStartError(f"start event {rest} does not exist in the channel"),
    "NOPERM": lambda rest: AccessDeniedError(f"NOPERM {rest}"),
    # A publish's copy that landed after its retry had been stored and answered: no caller
    # waits for it (its connection was given up), so this is seen only by a lost reply.
    "STALE": lambda rest: StalePublishError(f"publish superseded: {rest}"),
    # A blocked read on a primary that Sentinel demoted: the connection must be made anew.
    "UNBLOCKED": lambda rest: ConnectionLostError(f"UNBLOCKED {rest}"),
    # The server answers nothing else while a script runs past its busy threshold (another
    # client's, say a Spark sink's commit), nor while it loads its data after a restart:
    # the command did not run, and is sent again once the server answers, as after an outage.
    "BUSY": lambda rest: ConnectionLostError(f"the server is busy running a script: BUSY {rest}"),
    "LOADING": lambda rest: ConnectionLostError(f"the server is loading its data: LOADING {rest}"),
    # Too few replicas: a server's min-replicas-to-write, or memory://, which has none.
    "NOREPLICAS": lambda rest: ReplicationError(rest),
}


def error_word(exc: ResponseError) -> tuple[str, str]:
    """Split an error reply into its leading word and the rest."""
    word, _, rest = str(exc).partition(" ")
    return word, rest


E = TypeVar("E", bound=BaseException)


def kept(exc: E) -> E:
    """An error reply kept as a value (a pipeline's reply, a tolerated error), without its
    traceback. The traceback holds the frames that hold the list or variable the reply is
    kept in: a reference cycle that only the garbage collector frees, made at every idle
    wait of a shared consumer (a closed tap's read answers NOGROUP), whose full collection
    stalled every consumer in the process for tens of milliseconds."""
    return exc.with_traceback(None)


def translate(exc: ResponseError, context: str = "") -> Exception:
    """Our error for a known reply; the ResponseError itself otherwise (a real failure)."""
    if isinstance(exc, NoPermissionError):  # redis-py strips the NOPERM word itself
        err: DurablesError = AccessDeniedError(f"NOPERM {exc}: the server's ACL refused it")
    else:
        word, rest = error_word(exc)
        make = _BY_PREFIX.get(word)
        if make is None:
            return exc
        err = make(rest)
    if context:
        err.args = (f"{context}: {err.args[0]}",)
    return err


def text(value: bytes | str) -> str:
    """A reply value as str (replies are bytes; redis-py's stubs also allow str)."""
    return value.decode() if isinstance(value, bytes) else value


def raw(redis: Redis | RedisCluster, *args: object) -> Any:
    """Send a command as is (for tests that look at server state by hand)."""
    return redis.execute_command(*args)  # type: ignore[no-untyped-call]


def streams_read(reply: Any) -> list[tuple[Any, list[Any]]]:
    """An XREAD / XREADGROUP reply as (stream key, entries) pairs, whether redis-py gave a
    RESP2 list or a RESP3 map; [] when nothing came."""
    if not reply:
        return []
    items = reply.items() if isinstance(reply, dict) else reply
    return [(stream, list(entries)) for stream, entries in items]


AS_SENT = ("XREADGROUP",)
"""Commands whose replies our parsers take as the server sent them: redis-py's own parse
of a stream read builds a dictionary per entry that `events.event_from_entry` would read
once and drop (about a fifth of a consumer's client time per event). Set on every client
we open, a cluster's node clients included (`transport.nodes_reading_as_sent`). The
parsers accept both shapes, so a client without it reads correctly, only slower."""


def as_sent(response: Any, **_options: Any) -> Any:
    """A response callback that leaves the reply as it came."""
    return response


def entries_read(reply: Any) -> list[Any]:
    """The entries of a one-stream XREAD / XREADGROUP reply, or []."""
    return [entry for _, entries in streams_read(reply) for entry in entries]


__all__ = [
    "AS_SENT",
    "as_sent",
    "entries_read",
    "error_word",
    "kept",
    "raw",
    "streams_read",
    "text",
    "translate",
]
