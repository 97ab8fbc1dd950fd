"""Reading server replies: stream reads as they came, error replies split into their word.

What an error reply means (an outage, a refusal, a full server, one of our scripts'
answers) is `durables.verdicts`'s to decide. Pure: the executor calls these on what came
back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from redis.exceptions import ResponseError

if TYPE_CHECKING:
    from redis import Redis
    from redis.cluster import RedisCluster


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
]
