"""Translation of server replies into our errors, by prefix (never by swallowing).

Lua scripts report expected failures as error replies that start with a word
(`NOCHANNEL`, `INUSE`, ...); Redis itself uses `NOGROUP`, `BUSYGROUP`, `NOSCRIPT`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .errors import (
    ChannelFullError,
    ChannelNotFound,
    ConnectionLostError,
    ConsumerClosedError,
    DurableInUseError,
    DurableNotFound,
    DurablesError,
    InvalidStartError,
)

if TYPE_CHECKING:
    from redis import Redis

Translate = Callable[[str], DurablesError]

_BY_PREFIX: dict[str, Translate] = {
    "NOCHANNEL": lambda rest: ChannelNotFound(rest),
    "NODURABLE": lambda rest: DurableNotFound(rest),
    "NOGROUP": lambda rest: DurableNotFound(f"no consumer group: {rest}"),
    "INUSE": lambda rest: DurableInUseError(f"already held by consumer {rest}"),
    "LEASELOST": lambda rest: DurableInUseError(rest),
    "DETACHED": lambda rest: ConsumerClosedError(rest),
    "FULL": lambda rest: ChannelFullError(f"the channel is at its capacity of {rest} events"),
    "NOSTART": lambda rest: InvalidStartError(f"start event {rest} does not exist in the channel"),
}


def error_word(exc: ResponseError) -> tuple[str, str]:
    """Split an error reply into its leading word and the rest."""
    word, _, rest = str(exc).partition(" ")
    return word, rest


def translate(exc: ResponseError, context: str = "") -> Exception:
    """Our error for a known reply; the ResponseError itself otherwise (a real failure)."""
    word, rest = error_word(exc)
    make = _BY_PREFIX.get(word)
    if make is None:
        return exc
    err = make(rest)
    if context:
        err.args = (f"{context}: {err.args[0]}",)
    return err


@contextmanager
def server_errors(context: str = "") -> Iterator[None]:
    """Run Redis calls, raising our errors for known replies and lost connections."""
    try:
        yield
    except ResponseError as exc:
        raise translate(exc, context) from exc
    except (RedisConnectionError, RedisTimeoutError) as exc:
        where = f"{context}: " if context else ""
        raise ConnectionLostError(f"{where}lost the connection to the server: {exc}") from exc


def text(value: bytes | str) -> str:
    """A reply value as str (replies are bytes; redis-py's stubs also allow str)."""
    return value.decode() if isinstance(value, bytes) else value


def raw(redis: Redis, *args: object) -> Any:
    """Send a command as is; its reply is parsed by redis-py's callback, if any."""
    return redis.execute_command(*args)  # type: ignore[no-untyped-call]


def streams_read(reply: Any) -> list[tuple[Any, list[Any]]]:
    """An XREAD / XREADGROUP reply as (stream key, entries) pairs, whether redis-py gave a
    RESP2 list or a RESP3 map; [] when nothing came."""
    if not reply:
        return []
    items = reply.items() if isinstance(reply, dict) else reply
    return [(stream, list(entries)) for stream, entries in items]


def entries_read(reply: Any) -> list[Any]:
    """The entries of a one-stream XREAD / XREADGROUP reply, or []."""
    return [entry for _, entries in streams_read(reply) for entry in entries]
